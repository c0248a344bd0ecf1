// Package evalscore scores a replay eval (docs/API.md, "Evals"): the checks run on each pair of answers,
// the pairwise judge's request and verdict, the summary with its 95% interval, and the promotion gate.
package evalscore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/svcdev/svc/internal/conv"
)

// Answer is one side's answer in chat form. A Messages or a Responses answer is read into it by its
// reader: stop_reason end_turn is "stop", tool_use "tool_calls", max_tokens "length"; a completed
// response is "stop", or "tool_calls" when it holds function calls, an incomplete one "length".
type Answer struct {
	Text         string
	FinishReason string
	ToolCalls    []conv.ToolCall
}

// Ask is what the checks need of the replayed request: the tools it declared and its response_format
// (chat form; nil when it asked for none).
type Ask struct {
	Tools          []conv.Tool
	ResponseFormat json.RawMessage
}

// Check is one check's outcome on both sides of a pair.
type Check struct {
	Name      string `json:"name"`
	Baseline  bool   `json:"baseline"`
	Candidate bool   `json:"candidate"`
}

// The checks' names.
const (
	CheckFinishReason = "finish_reason"
	CheckJSON         = "json"
	CheckToolCalls    = "tool_calls"
)

// Compare runs every check that applies on both answers and says whether they are identical (same
// text, finish reason and tool calls, ids aside). "finish_reason": the candidate's is the baseline's
// (the baseline passes it by definition); "json", only when the request's response_format asks for
// json_object or json_schema: the text is a JSON object, valid against the schema; "tool_calls", only
// when either side calls tools: each call names a tool the request declared, with arguments that are a
// JSON object valid against the tool's parameters.
func Compare(ask Ask, baseline, candidate Answer) (identical bool, checks []Check) {
	identical = baseline.Text == candidate.Text && baseline.FinishReason == candidate.FinishReason &&
		sameCalls(baseline.ToolCalls, candidate.ToolCalls)
	checks = append(checks, Check{Name: CheckFinishReason, Baseline: true,
		Candidate: candidate.FinishReason == baseline.FinishReason})
	if kind, schema := jsonAsked(ask.ResponseFormat); kind != "" {
		v := newValidator(schema)
		checks = append(checks, Check{Name: CheckJSON, Baseline: v.object(baseline.Text), Candidate: v.object(candidate.Text)})
	}
	if len(baseline.ToolCalls) > 0 || len(candidate.ToolCalls) > 0 {
		tools := declared(ask.Tools)
		checks = append(checks, Check{Name: CheckToolCalls, Baseline: tools.valid(baseline.ToolCalls),
			Candidate: tools.valid(candidate.ToolCalls)})
	}
	return identical, checks
}

// sameCalls says whether two answers call the same functions with the same arguments, in order
// (the ids the model made up aside; arguments compared as JSON values).
func sameCalls(a, b []conv.ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Function.Name != b[i].Function.Name || !sameJSON(a[i].Function.Arguments, b[i].Function.Arguments) {
			return false
		}
	}
	return true
}

func sameJSON(a, b string) bool {
	if a == b {
		return true
	}
	var x, y bytes.Buffer
	if json.Compact(&x, []byte(a)) != nil || json.Compact(&y, []byte(b)) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// jsonAsked reads a chat response_format: its type when it asks for JSON, and the schema of a
// json_schema one.
func jsonAsked(raw json.RawMessage) (kind string, schema json.RawMessage) {
	if len(raw) == 0 {
		return "", nil
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(raw, &rf) != nil {
		return "", nil
	}
	switch rf.Type {
	case "json_object":
		return rf.Type, nil
	case "json_schema":
		return rf.Type, rf.JSONSchema.Schema
	}
	return "", nil
}

// validator checks JSON texts against one schema; with no schema (or one that does not compile: a
// schema svc cannot read is not the model's fault) a text need only be a JSON object.
type validator struct{ schema *jsonschema.Schema }

func newValidator(schema json.RawMessage) validator {
	if len(schema) == 0 || string(schema) == "null" {
		return validator{}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return validator{}
	}
	c := jsonschema.NewCompiler()
	if c.AddResource("schema.json", doc) != nil {
		return validator{}
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		return validator{}
	}
	return validator{schema: s}
}

// object says whether text is a JSON object valid against the schema.
func (v validator) object(text string) bool {
	val, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return false
	}
	if v.schema == nil {
		_, ok := val.(map[string]any)
		return ok
	}
	return v.schema.Validate(val) == nil
}

// toolSet is the tools a request declared, by name, with their parameters' validators made once.
type toolSet map[string]validator

func declared(tools []conv.Tool) toolSet {
	set := make(toolSet, len(tools))
	for _, t := range tools {
		if t.Type != "" && t.Type != "function" {
			continue
		}
		set[t.Function.Name] = newValidator(t.Function.Parameters)
	}
	return set
}

func (s toolSet) valid(calls []conv.ToolCall) bool {
	for _, c := range calls {
		v, ok := s[c.Function.Name]
		if !ok || !v.object(argumentsOrEmpty(c.Function.Arguments)) {
			return false
		}
	}
	return true
}

// argumentsOrEmpty reads a call's arguments as OpenAI does: an empty text is no arguments, {}.
func argumentsOrEmpty(args string) string {
	if strings.TrimSpace(args) == "" {
		return "{}"
	}
	return args
}

// Verdict is the judge's verdict on a pair.
type Verdict string

// The verdicts.
const (
	VerdictCandidate Verdict = "candidate"
	VerdictBaseline  Verdict = "baseline"
	VerdictTie       Verdict = "tie"
)

// judgeMaxChars bounds the conversation a judge is shown: past it the earliest turns after the first
// are left out, said so in their place.
const judgeMaxChars = 48 << 10

const judgeSystem = `You compare two answers given to the same conversation and say which is better.
Judge by the rubric below. Answer with exactly one word: A (answer A is better), B (answer B is better) or tie.`

// JudgeBody is a chat completions request body for the judge model, at temperature 0: the rubric, the
// conversation's turns, answer A and answer B, asking for one of "A", "B" or "tie".
func JudgeBody(model, rubric string, c conv.Conversation, a, b Answer) []byte {
	if strings.TrimSpace(rubric) == "" {
		rubric = "The better answer is more correct, more helpful and follows the instructions of the conversation more closely."
	}
	var u strings.Builder
	u.WriteString("The conversation:\n\n")
	u.WriteString(transcript(c.Messages, judgeMaxChars))
	u.WriteString("\n\nAnswer A:\n")
	u.WriteString(answerText(a))
	u.WriteString("\n\nAnswer B:\n")
	u.WriteString(answerText(b))
	u.WriteString("\n\nWhich answer is better? Reply with exactly one of: A, B, tie.")
	c = conv.Conversation{Messages: []conv.Message{
		{Role: "system", Content: judgeSystem + "\n\nRubric: " + rubric},
		{Role: "user", Content: u.String()},
	}}
	out, _ := c.Body(map[string]any{"model": model, "temperature": 0, "max_tokens": 16}) // strings and numbers always marshal
	return out
}

// transcript writes turns as "role: text" blocks, a tool call as its name and arguments; past max
// characters the turns after the first are left out from the earliest on.
func transcript(msgs []conv.Message, max int) string {
	blocks := make([]string, len(msgs))
	for i, m := range msgs {
		var b strings.Builder
		b.WriteString("[" + m.Role + "]\n")
		b.WriteString(conv.Text(m.Content))
		for _, tc := range m.ToolCalls {
			fmt.Fprintf(&b, "\n(calls %s %s)", tc.Function.Name, tc.Function.Arguments)
		}
		blocks[i] = b.String()
	}
	total := 0
	for _, b := range blocks {
		total += len(b) + 2
	}
	cut := 0 // turns left out after the first
	for total > max && 1+cut < len(blocks)-1 {
		total -= len(blocks[1+cut]) + 2
		cut++
	}
	if cut == 0 {
		return strings.Join(blocks, "\n\n")
	}
	kept := append([]string{blocks[0], fmt.Sprintf("[%d earlier turns left out]", cut)}, blocks[1+cut:]...)
	return strings.Join(kept, "\n\n")
}

func answerText(a Answer) string {
	var b strings.Builder
	b.WriteString(a.Text)
	for _, tc := range a.ToolCalls {
		fmt.Fprintf(&b, "\n(calls %s %s)", tc.Function.Name, tc.Function.Arguments)
	}
	if b.Len() == 0 {
		return "(empty)"
	}
	return b.String()
}

// ParseJudge reads a judge's answer: "A", "B" or "tie", in any case, bare or as "Answer A", with
// punctuation or Markdown around it, alone or on the answer's last line; ok is false otherwise.
func ParseJudge(text string) (choice string, ok bool) {
	if c, ok := judgeWord(text); ok {
		return c, true
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return judgeWord(lines[len(lines)-1])
}

func judgeWord(s string) (string, bool) {
	s = strings.ToLower(strings.Trim(strings.TrimSpace(s), "*_`'\".:!()[] "))
	s = strings.TrimPrefix(s, "verdict")
	s = strings.TrimSpace(strings.TrimLeft(s, ": "))
	s = strings.TrimSpace(strings.TrimPrefix(s, "answer"))
	s = strings.Trim(s, "*_`'\".:!()[] ")
	switch s {
	case "a":
		return "A", true
	case "b":
		return "B", true
	case "tie", "equal", "draw", "neither", "both":
		return "tie", true
	}
	return "", false
}

// Combine reads the judge's two answers: first asked with A the baseline and B the candidate, then
// with the answers swapped. A preference that holds in both orders is the verdict; one that flips
// (the same letter twice), a tie in either order, or an answer ParseJudge cannot read is a tie.
func Combine(first, swapped string) Verdict {
	switch {
	case first == "B" && swapped == "A":
		return VerdictCandidate
	case first == "A" && swapped == "B":
		return VerdictBaseline
	}
	return VerdictTie
}

// Result is what the summary reads of one replayed pair.
type Result struct {
	Identical bool
	Checks    []Check
	Verdict   Verdict // "" when the eval has no judge, or the judge could not be asked
	Feedback  int     // the source run's recorded feedback: 1, -1, or 0 for none or neutral
}

// PassFail counts a check's outcomes on one side.
type PassFail struct {
	Passed int `json:"passed"`
	Failed int `json:"failed"`
}

// SideChecks are check outcomes on both sides.
type SideChecks struct {
	Baseline  PassFail `json:"baseline"`
	Candidate PassFail `json:"candidate"`
}

// NamedChecks are one check's outcomes on both sides.
type NamedChecks struct {
	Name string `json:"name"`
	SideChecks
}

// Judged is the judge's verdicts: the win rate counts a tie as half a win, with its 95% Wilson
// interval.
type Judged struct {
	Wins        int     `json:"wins"`
	Ties        int     `json:"ties"`
	Losses      int     `json:"losses"`
	WinRate     float64 `json:"winRate"`
	WinRateLow  float64 `json:"winRateLow"`
	WinRateHigh float64 `json:"winRateHigh"`
}

// Agreement counts the judged runs that had feedback, and those where the judge agreed with it: a
// thumbs-down on the recorded answer agrees with a verdict for the candidate, a thumbs-up with one for
// the baseline or a tie.
type Agreement struct {
	Runs  int `json:"runs"`
	Agree int `json:"agree"`
}

// Summary is an eval's outcome (docs/API.md, "Evals"). Passed: at least one pair, no check
// regression, and with a judge a win rate whose lower bound reaches minWinRate.
type Summary struct {
	Pairs     int           `json:"pairs"`
	Identical int           `json:"identical"`
	Checks    SideChecks    `json:"checks"`
	ByCheck   []NamedChecks `json:"byCheck"`
	Regressed []string      `json:"regressed"`
	Judged    *Judged       `json:"judged"`
	Agreement *Agreement    `json:"agreement"`
	Passed    bool          `json:"passed"`
}

// regressionSlack is how far a candidate's pass rate of a check may fall below the baseline's (one
// percentage point) before it counts as a regression.
const regressionSlack = 0.01

// Summarize sums an eval's results. judged says whether the eval has a judge; minWinRate is the gate's
// (0.5 when the deployment has none).
func Summarize(results []Result, judged bool, minWinRate float64) Summary {
	s := Summary{Pairs: len(results), ByCheck: []NamedChecks{}, Regressed: []string{}}
	byName := map[string]*NamedChecks{}
	var j Judged
	var agree Agreement
	for _, r := range results {
		if r.Identical {
			s.Identical++
		}
		for _, c := range r.Checks {
			n := byName[c.Name]
			if n == nil {
				n = &NamedChecks{Name: c.Name}
				byName[c.Name] = n
			}
			count(&n.Baseline, c.Baseline)
			count(&n.Candidate, c.Candidate)
			count(&s.Checks.Baseline, c.Baseline)
			count(&s.Checks.Candidate, c.Candidate)
		}
		switch r.Verdict {
		case VerdictCandidate:
			j.Wins++
		case VerdictBaseline:
			j.Losses++
		case VerdictTie:
			j.Ties++
		default:
			continue
		}
		if r.Feedback != 0 {
			agree.Runs++
			if (r.Feedback < 0 && r.Verdict == VerdictCandidate) || (r.Feedback > 0 && r.Verdict != VerdictCandidate) {
				agree.Agree++
			}
		}
	}
	for _, n := range byName {
		s.ByCheck = append(s.ByCheck, *n)
		if rate(n.Candidate) < rate(n.Baseline)-regressionSlack {
			s.Regressed = append(s.Regressed, n.Name)
		}
	}
	sort.Slice(s.ByCheck, func(a, b int) bool { return s.ByCheck[a].Name < s.ByCheck[b].Name })
	sort.Strings(s.Regressed)
	s.Passed = s.Pairs > 0 && len(s.Regressed) == 0
	if judged {
		n := j.Wins + j.Ties + j.Losses
		if n > 0 {
			won := float64(j.Wins) + float64(j.Ties)/2
			j.WinRate = won / float64(n)
			j.WinRateLow, j.WinRateHigh = Wilson(won, n)
		}
		s.Judged = &j
		if agree.Runs > 0 {
			s.Agreement = &agree
		}
		s.Passed = s.Passed && n > 0 && j.WinRateLow >= minWinRate
	}
	return s
}

func count(pf *PassFail, ok bool) {
	if ok {
		pf.Passed++
	} else {
		pf.Failed++
	}
}

func rate(pf PassFail) float64 {
	if pf.Passed+pf.Failed == 0 {
		return 1
	}
	return float64(pf.Passed) / float64(pf.Passed+pf.Failed)
}

// Wilson is the 95% Wilson score interval of a proportion: won successes (a tie counts half) of n.
func Wilson(won float64, n int) (low, high float64) {
	if n <= 0 {
		return 0, 1
	}
	const z = 1.959963984540054
	nf := float64(n)
	p := won / nf
	denom := 1 + z*z/nf
	centre := (p + z*z/(2*nf)) / denom
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / denom
	return math.Max(0, centre-half), math.Min(1, centre+half)
}

// Gate is a deployment's promotion gate: promote needs a done eval of the exact candidate, finished at
// most MaxAgeHours ago (0: any age), with no check regression and, when MinWinRate is above 0, a judged
// win rate whose lower bound reaches it.
type Gate struct {
	MinWinRate  float64 `json:"minWinRate"`
	MaxAgeHours float64 `json:"maxAgeHours"`
}

// Allows says whether an eval (its state, when it finished, its summary) lets promote go on under the
// gate at now; reason is a sentence for the 409 eval_required when it does not.
func (g Gate) Allows(state string, finishedAt time.Time, s *Summary, now time.Time) (ok bool, reason string) {
	if state != "done" || s == nil {
		return false, fmt.Sprintf("the candidate's latest eval is %s, not done", state)
	}
	if g.MaxAgeHours > 0 {
		if age := now.Sub(finishedAt); age > time.Duration(g.MaxAgeHours*float64(time.Hour)) {
			return false, fmt.Sprintf("the candidate's latest eval finished %s ago; the gate takes evals of the last %s h",
				roundHours(age), trimFloat(g.MaxAgeHours))
		}
	}
	if s.Pairs == 0 {
		return false, "the candidate's latest eval replayed no runs"
	}
	if len(s.Regressed) > 0 {
		var parts []string
		for _, name := range s.Regressed {
			for _, c := range s.ByCheck {
				if c.Name == name {
					parts = append(parts, fmt.Sprintf("%s (baseline %.0f%%, candidate %.0f%%)", name,
						100*rate(c.Baseline), 100*rate(c.Candidate)))
				}
			}
		}
		return false, "the candidate fails checks the baseline passes: " + strings.Join(parts, ", ")
	}
	if g.MinWinRate > 0 {
		if s.Judged == nil || s.Judged.Wins+s.Judged.Ties+s.Judged.Losses == 0 {
			return false, fmt.Sprintf("the candidate's latest eval had no judge; the gate needs a judged win rate of at least %.2f", g.MinWinRate)
		}
		if s.Judged.WinRateLow < g.MinWinRate {
			return false, fmt.Sprintf("the candidate's win rate is %.2f (95%% interval %.2f–%.2f); the gate needs its lower bound at %.2f or more",
				s.Judged.WinRate, s.Judged.WinRateLow, s.Judged.WinRateHigh, g.MinWinRate)
		}
	}
	return true, ""
}

func roundHours(d time.Duration) string {
	h := d.Hours()
	if h < 1 {
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return trimFloat(h) + " h"
}

func trimFloat(f float64) string {
	return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64)
}
