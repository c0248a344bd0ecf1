package evalscore

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/conv"
)

var weather = conv.Tool{Type: "function", Function: conv.ToolFunc{Name: "get_weather",
	Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}}

func call(name, args string) conv.ToolCall {
	return conv.ToolCall{ID: "call_" + name, Type: "function", Function: conv.Function{Name: name, Arguments: args}}
}

func checkNamed(t *testing.T, checks []Check, name string) Check {
	t.Helper()
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %q check in %+v", name, checks)
	return Check{}
}

func TestCompareToolCalls(t *testing.T) {
	ask := Ask{Tools: []conv.Tool{weather}}
	base := Answer{FinishReason: "tool_calls", ToolCalls: []conv.ToolCall{call("get_weather", `{"city":"Paris"}`)}}
	for _, tc := range []struct {
		name      string
		cand      Answer
		identical bool
		ok        bool
	}{
		{"same call, other id and spacing", Answer{FinishReason: "tool_calls", ToolCalls: []conv.ToolCall{{ID: "x", Function: conv.Function{Name: "get_weather", Arguments: `{ "city": "Paris" }`}}}}, true, true},
		{"other city", Answer{FinishReason: "tool_calls", ToolCalls: []conv.ToolCall{call("get_weather", `{"city":"Rome"}`)}}, false, true},
		{"undeclared tool", Answer{FinishReason: "tool_calls", ToolCalls: []conv.ToolCall{call("get_time", `{}`)}}, false, false},
		{"arguments against the schema", Answer{FinishReason: "tool_calls", ToolCalls: []conv.ToolCall{call("get_weather", `{"town":"Paris"}`)}}, false, false},
		{"arguments not JSON", Answer{FinishReason: "tool_calls", ToolCalls: []conv.ToolCall{call("get_weather", `{"city":"Par`)}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			identical, checks := Compare(ask, base, tc.cand)
			if identical != tc.identical {
				t.Errorf("identical %v, want %v", identical, tc.identical)
			}
			c := checkNamed(t, checks, CheckToolCalls)
			if !c.Baseline || c.Candidate != tc.ok {
				t.Errorf("tool_calls check %+v, want baseline true, candidate %v", c, tc.ok)
			}
			if !checkNamed(t, checks, CheckFinishReason).Candidate {
				t.Error("same finish reason read as different")
			}
		})
	}
}

func TestCompareOnlyTheChecksThatApply(t *testing.T) {
	identical, checks := Compare(Ask{}, Answer{Text: "hi", FinishReason: "stop"}, Answer{Text: "hi", FinishReason: "length"})
	if identical {
		t.Error("answers with different finish reasons read as identical")
	}
	if len(checks) != 1 || checks[0] != (Check{Name: CheckFinishReason, Baseline: true, Candidate: false}) {
		t.Errorf("checks %+v, want only a failed finish_reason", checks)
	}
}

func TestCompareJSON(t *testing.T) {
	schema := `{"type":"json_schema","json_schema":{"name":"e","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}}}`
	for _, tc := range []struct {
		rf, text string
		ok       bool
	}{
		{`{"type":"json_object"}`, `{"a":1}`, true},
		{`{"type":"json_object"}`, `[1]`, false},
		{`{"type":"json_object"}`, `Sure! {"a":1}`, false},
		{schema, `{"n":3}`, true},
		{schema, `{"n":"three"}`, false},
		{schema, `{}`, false},
	} {
		_, checks := Compare(Ask{ResponseFormat: json.RawMessage(tc.rf)}, Answer{Text: `{"n":1}`, FinishReason: "stop"},
			Answer{Text: tc.text, FinishReason: "stop"})
		if c := checkNamed(t, checks, CheckJSON); c.Candidate != tc.ok || !c.Baseline {
			t.Errorf("%s against %s: %+v, want candidate %v", tc.text, tc.rf, c, tc.ok)
		}
	}
	if _, checks := Compare(Ask{ResponseFormat: json.RawMessage(`{"type":"text"}`)}, Answer{}, Answer{}); len(checks) != 1 {
		t.Errorf("a text response_format gave checks %+v", checks)
	}
}

func TestParseJudge(t *testing.T) {
	for in, want := range map[string]string{
		"A": "A", " b\n": "B", "**A**": "A", "Answer B.": "B", "tie": "tie", "Tie.": "tie",
		"Verdict: A": "A", "Both answers are fine.\nB": "B", "They are equal": "",
		"I prefer the second one": "",
	} {
		got, ok := ParseJudge(in)
		if got != want || ok != (want != "") {
			t.Errorf("ParseJudge(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestCombineTiesAFlippedVerdict(t *testing.T) {
	for _, tc := range []struct {
		first, swapped string
		want           Verdict
	}{
		{"B", "A", VerdictCandidate},
		{"A", "B", VerdictBaseline},
		{"A", "A", VerdictTie}, // position bias: A both times
		{"B", "B", VerdictTie},
		{"tie", "A", VerdictTie},
		{"B", "", VerdictTie},
	} {
		if got := Combine(tc.first, tc.swapped); got != tc.want {
			t.Errorf("Combine(%q, %q) = %q, want %q", tc.first, tc.swapped, got, tc.want)
		}
	}
}

func TestJudgeBody(t *testing.T) {
	c := conv.Conversation{Messages: []conv.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Capital of France?"}}}
	body := JudgeBody("judge-model", "Prefer correct answers.", c, Answer{Text: "Paris."}, Answer{Text: "Lyon."})
	var req struct {
		Model       string         `json:"model"`
		Temperature *float64       `json:"temperature"`
		Messages    []conv.Message `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	if req.Model != "judge-model" || req.Temperature == nil || *req.Temperature != 0 || len(req.Messages) != 2 {
		t.Fatalf("judge body %s", body)
	}
	sys, user := conv.Text(req.Messages[0].Content), conv.Text(req.Messages[1].Content)
	if !strings.Contains(sys, "Prefer correct answers.") {
		t.Errorf("the rubric is not in the system turn: %q", sys)
	}
	a, b := strings.Index(user, "Answer A:\nParis."), strings.Index(user, "Answer B:\nLyon.")
	if !strings.Contains(user, "Capital of France?") || a < 0 || b < a {
		t.Errorf("the user turn does not show the conversation, then A, then B: %q", user)
	}
}

func TestJudgeBodyBoundsALongConversation(t *testing.T) {
	var msgs []conv.Message
	msgs = append(msgs, conv.Message{Role: "system", Content: "SYSTEM"})
	for i := 0; i < 200; i++ {
		msgs = append(msgs, conv.Message{Role: "user", Content: strings.Repeat("x", 1000)})
	}
	msgs = append(msgs, conv.Message{Role: "user", Content: "LAST QUESTION"})
	body := JudgeBody("j", "", conv.Conversation{Messages: msgs}, Answer{Text: "a"}, Answer{Text: "b"})
	if len(body) > judgeMaxChars+4096 {
		t.Errorf("judge body of %d bytes for a bound of %d", len(body), judgeMaxChars)
	}
	for _, want := range []string{"SYSTEM", "LAST QUESTION", "earlier turns left out"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the bounded body lost %q", want)
		}
	}
}

func TestWilson(t *testing.T) {
	// Reference values: 8 of 10 gives [0.4902, 0.9433]; 50 of 100 [0.4038, 0.5962].
	for _, tc := range []struct {
		won       float64
		n         int
		low, high float64
	}{{8, 10, 0.4902, 0.9433}, {50, 100, 0.4038, 0.5962}, {0, 20, 0, 0.1611}} {
		low, high := Wilson(tc.won, tc.n)
		if math.Abs(low-tc.low) > 1e-4 || math.Abs(high-tc.high) > 1e-4 {
			t.Errorf("Wilson(%v, %d) = [%.4f, %.4f], want [%.4f, %.4f]", tc.won, tc.n, low, high, tc.low, tc.high)
		}
	}
}

func results(n int, verdict Verdict, candidateJSON bool) []Result {
	out := make([]Result, n)
	for i := range out {
		out[i] = Result{Checks: []Check{{Name: CheckJSON, Baseline: true, Candidate: candidateJSON}}, Verdict: verdict}
	}
	return out
}

func TestSummarize(t *testing.T) {
	// A candidate that breaks JSON on 30 of 100 calls regresses, whatever the judge says.
	rs := append(results(70, VerdictCandidate, true), results(30, VerdictCandidate, false)...)
	s := Summarize(rs, true, 0.5)
	if s.Passed || len(s.Regressed) != 1 || s.Regressed[0] != CheckJSON {
		t.Errorf("a JSON regression passed: %+v", s)
	}
	if s.Checks.Baseline.Passed != 100 || s.Checks.Candidate.Failed != 30 {
		t.Errorf("check counts %+v", s.Checks)
	}

	// A better candidate: 60 wins, 30 ties, 10 losses: rate 0.75, lower bound above 0.5.
	rs = append(append(results(60, VerdictCandidate, true), results(30, VerdictTie, true)...), results(10, VerdictBaseline, true)...)
	s = Summarize(rs, true, 0.5)
	if !s.Passed || s.Judged.WinRate != 0.75 || s.Judged.WinRateLow < 0.5 || s.Judged.WinRateHigh > 1 {
		t.Errorf("a better candidate: %+v %+v", s, s.Judged)
	}

	// A worse one: its interval excludes a win.
	rs = append(results(20, VerdictCandidate, true), results(80, VerdictBaseline, true)...)
	s = Summarize(rs, true, 0.5)
	if s.Passed || s.Judged.WinRateHigh >= 0.5 {
		t.Errorf("a worse candidate: %+v %+v", s, s.Judged)
	}

	// No judge: passed on checks alone; a one-point slack.
	rs = append(results(99, "", true), results(1, "", false)...)
	if s := Summarize(rs, false, 0.5); !s.Passed || s.Judged != nil {
		t.Errorf("one failure in 100 without a judge: %+v", s)
	}
	if s := Summarize(nil, false, 0.5); s.Passed {
		t.Error("an eval of no pairs passed")
	}
}

func TestAgreement(t *testing.T) {
	rs := []Result{
		{Verdict: VerdictCandidate, Feedback: -1}, // agree: the recorded answer was disliked
		{Verdict: VerdictBaseline, Feedback: 1},   // agree
		{Verdict: VerdictTie, Feedback: 1},        // agree
		{Verdict: VerdictCandidate, Feedback: 1},  // disagree
		{Verdict: VerdictBaseline, Feedback: -1},  // disagree
		{Verdict: VerdictCandidate},               // no feedback
	}
	s := Summarize(rs, true, 0.5)
	if s.Agreement == nil || *s.Agreement != (Agreement{Runs: 5, Agree: 3}) {
		t.Errorf("agreement %+v, want 3 of 5", s.Agreement)
	}
}

func TestGate(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	good := Summarize(append(results(60, VerdictCandidate, true), results(40, VerdictTie, true)...), true, 0.5)
	g := Gate{MinWinRate: 0.5, MaxAgeHours: 72}
	if ok, why := g.Allows("done", now.Add(-time.Hour), &good, now); !ok {
		t.Errorf("a fresh passing eval refused: %s", why)
	}
	for name, tc := range map[string]struct {
		state string
		age   time.Duration
		s     Summary
		want  string
	}{
		"running":   {"running", time.Hour, good, "running"},
		"too old":   {"done", 80 * time.Hour, good, "finished 80 h ago; the gate takes evals of the last 72 h"},
		"regressed": {"done", time.Hour, Summarize(append(results(70, VerdictCandidate, true), results(30, VerdictCandidate, false)...), true, 0.5), "json (baseline 100%, candidate 70%)"},
		"no judge":  {"done", time.Hour, Summarize(results(10, "", true), false, 0.5), "had no judge"},
		"a tie":     {"done", time.Hour, Summarize(results(100, VerdictTie, true), true, 0.5), "win rate is 0.50"},
	} {
		s := tc.s
		ok, why := g.Allows(tc.state, now.Add(-tc.age), &s, now)
		if ok || !strings.Contains(why, tc.want) {
			t.Errorf("%s: allowed %v, %q; want a refusal saying %q", name, ok, why, tc.want)
		}
	}
	// A gate with no win rate takes an eval without a judge.
	noJudge := Summarize(results(10, "", true), false, 0)
	if ok, why := (Gate{MaxAgeHours: 72}).Allows("done", now, &noJudge, now); !ok {
		t.Errorf("a gate of checks only refused: %s", why)
	}
}
