package bench

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/mockupstream"
)

func TestJudgeTranslated(t *testing.T) {
	for _, c := range []struct {
		vsChat         float64
		judged, within bool
	}{
		{1.0, true, true},
		{0.8, true, true}, // cheaper than the chat stream: a noisy round, within budget
		{1.3, true, true}, // the budget itself
		{1.31, true, false},
		{2.5, true, false},
		{0, false, false}, // CPU time not measured: not judged
	} {
		judged, ok := JudgeTranslated(c.vsChat, BudgetTranslated)
		if judged != c.judged || ok != c.within {
			t.Errorf("JudgeTranslated(%v) = judged %v, within %v; want %v, %v", c.vsChat, judged, ok, c.judged, c.within)
		}
	}
}

// TestTranslatedReport renders a streamed scenario with two translated rows from known rounds: CPU per
// chunk is CPU per request over the upstream's chunks, the ratio to the chat row is taken round by
// round (so that a slow round cancels out), and the budget check judges its median, marking the row
// over 1.3× FAIL, while the chat rows' checks leave the translated rows out.
func TestTranslatedReport(t *testing.T) {
	bare := &Row{Name: "bare proxy"}
	chat := &Row{Name: "edge, retention none", Edge: true}
	rows := []*Row{bare, chat,
		{Name: "edge, messages", Edge: true, Surface: SurfaceMessages, Chat: chat},
		{Name: "edge, responses", Edge: true, Surface: SurfaceResponses, Chat: chat},
	}
	us := time.Microsecond
	round := func(cpu time.Duration, events, nBytes float64) RoundResult {
		return RoundResult{RPS: 1000, P50: time.Millisecond, P99: 2 * time.Millisecond, TTFB50: 300 * us, CPUPerReq: cpu, EventsPerReq: events, BytesPerReq: nBytes}
	}
	res := [][]RoundResult{
		{round(100*us, 19, 3000), round(200*us, 19, 3000), round(100*us, 19, 3000)}, // bare; round 2 was slow
		{round(190*us, 19, 3100), round(380*us, 19, 3100), round(190*us, 19, 3100)},
		{round(209*us, 23, 4200), round(418*us, 23, 4200), round(228*us, 23, 4200)},    // 1.1, 1.1, 1.2
		{round(285*us, 40, 21000), round(456*us, 40, 21000), round(266*us, 40, 21000)}, // 1.5, 1.2, 1.4
	}
	sc := Scenario{Stream: true, Conns: 16}
	figures := Figures{}
	var out bytes.Buffer
	PrintScenario(&out, sc, rows, res, 0, figures)
	PrintTranslated(&out, sc, rows, res, 19, figures)
	PrintBudget(&out, 16, rows, []Scenario{sc}, figures)
	text := out.String()
	for _, want := range []string{
		"every answer is 19 chat chunks from upstream",
		"edge, retention none          19      3100     10.0µs   (relayed chat)",
		"edge, messages                23      4200     12.0µs   1.10/1.10/1.20 vs edge, retention none",
		"edge, responses               40     21000     15.0µs   1.20/1.40/1.50 vs edge, retention none",
		"≤ 1.3× the relayed chat stream's",
		"PASS  edge, messages         stream×16  1.10×",
		"FAIL  edge, responses        stream×16  1.40×*",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the report lacks %q:\n%s", want, text)
		}
	}
	if f := figures["edge, responses"][sc]; math.Abs(f.VsChat-1.4) > 1e-9 {
		t.Errorf("responses figure %+v, want VsChat 1.4", f)
	}
	// The chat rows' checks (throughput, p50, ...) judge the chat rows only.
	checks := text[strings.Index(text, "budget checks"):strings.Index(text, "translated streams:")]
	if strings.Contains(checks, "edge, messages") || !strings.Contains(checks, "edge, retention none") {
		t.Errorf("the chat rows' checks should list the chat row and no translated one:\n%s", checks)
	}

	// A round whose CPU time was not read: no ratio, nothing judged.
	res[2][1].CPUPerReq = 0
	figures = Figures{}
	out.Reset()
	PrintTranslated(&out, sc, rows, res, 19, figures)
	PrintBudget(&out, 16, rows, []Scenario{sc}, figures)
	if text := out.String(); !strings.Contains(text, "edge, messages") || strings.Contains(text, "PASS  edge, messages") ||
		!strings.Contains(text, "edge, messages         stream×16  -") || figures["edge, messages"][sc].VsChat != 0 {
		t.Errorf("a row with a round unmeasured is judged:\n%s", text)
	}
}

// TestMeasureSurfaces loads the mock upstream on its chat, Messages and Responses routes (their real
// wire formats) like the translated rows load the edge: every row completes requests, and the events
// and bytes counted per answer are those of the answer read independently, for each surface.
func TestMeasureSurfaces(t *testing.T) {
	mock := httptest.NewServer(mockupstream.New(mockupstream.Config{Model: "mock-model", Tokens: 4, ServeMessages: true, ServeResponses: true}, false))
	defer mock.Close()
	var rows []*Row
	for _, s := range []Surface{SurfaceChat, SurfaceMessages, SurfaceResponses} {
		rows = append(rows, &Row{Name: s.String(), URL: mock.URL + s.Path(), Surface: s, Key: "sk-bench"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	plan := Plan{Scenario: Scenario{Stream: true, Conns: 2}, Body: RequestBody(true, true), Rounds: 1, Duration: 400 * time.Millisecond, // room for a loaded machine
		CPUTime: func(int) (time.Duration, bool) { return 0, false }}
	res, err := Measure(ctx, plan, rows)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		// The same answer, read whole: its events are its blank-line-ended blocks.
		req, _ := http.NewRequest(http.MethodPost, r.URL, bytes.NewReader(plan.body(r)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		events := strings.Count(string(body), "\n\n")
		got := res[i][0]
		// Bytes differ a little from answer to answer: the mock numbers its answers' ids.
		if got.RPS <= 0 || got.EventsPerReq != float64(events) || math.Abs(got.BytesPerReq-float64(len(body))) > 0.02*float64(len(body)) {
			t.Errorf("%s: %.1f events and %.0f bytes per answer (%.0f req/s), want %d and %d:\n%s", r.Name, got.EventsPerReq, got.BytesPerReq, got.RPS, events, len(body), body)
		}
	}
	n, err := UpstreamChunks(ctx, mock.URL+"/v1/chat/completions")
	if want := 1 + 4 + 1 + 1; n != want || err != nil { // role, 4 tokens, finish, usage
		t.Errorf("UpstreamChunks = %d, %v; want %d", n, err, want)
	}
	// A route that does not serve the surface is an error, not a row of empty answers.
	rows[1].URL = mock.URL + "/v1/chat/completions"
	if _, err := Measure(ctx, plan, rows[1:2]); err == nil || !strings.Contains(err.Error(), "messages") {
		t.Errorf("messages events expected from a chat route: error %v", err)
	}
}
