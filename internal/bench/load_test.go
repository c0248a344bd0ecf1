package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/mockupstream"
)

// TestMeasureThroughTheBareProxy runs a small bench on loopback: the mock upstream directly and through
// the bare proxy, streamed and not, one short round each. Every row gets results, the streamed answers
// end with [DONE] (one() checks it), and the proxy saw no body read after its handler returned.
func TestMeasureThroughTheBareProxy(t *testing.T) {
	mock := httptest.NewServer(mockupstream.New(mockupstream.Config{Model: "mock-model", Tokens: 4}, false))
	defer mock.Close()
	h, err := BareProxy(mock.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(h)
	defer proxy.Close()
	rows := []*Row{
		{Name: "direct", URL: mock.URL + "/v1/chat/completions"},
		{Name: "bare proxy", URL: proxy.URL + "/v1/chat/completions"},
		{Name: "skipped", Skip: "not measured"},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, stream := range []bool{false, true} {
		settled := 0
		res, err := Measure(ctx, Plan{Scenario: Scenario{Stream: stream, Conns: 2}, Body: RequestBody(stream, true), Rounds: 2,
			Duration: 100 * time.Millisecond, CPUTime: func(int) (time.Duration, bool) { return 0, false },
			Settle: func(context.Context, *Row) { settled++ }}, rows)
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		for i, r := range rows[:2] {
			if len(res[i]) != 2 || res[i][0].RPS <= 0 || res[i][0].P50 <= 0 || res[i][1].TTFB50 <= 0 {
				t.Errorf("stream=%v, %s: rounds %+v, want 2 with throughput and latencies", stream, r.Name, res[i])
			}
		}
		if res[2] != nil {
			t.Errorf("a skipped row was measured: %+v", res[2])
		}
		if settled != 0 {
			t.Errorf("rows that record nothing were settled %d times", settled)
		}
	}
	resp, err := http.Get(proxy.URL + ProxyStatsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ps ProxyStats
	if err := json.NewDecoder(resp.Body).Decode(&ps); err != nil {
		t.Fatal(err)
	}
	if ps.Requests == 0 || ps.LateReads != 0 || ps.ReadErrors != 0 {
		t.Errorf("bare proxy stats %+v, want requests and no late reads or read errors", ps)
	}
}
