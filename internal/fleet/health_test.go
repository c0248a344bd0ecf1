package fleet

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// simMetrics is /metrics shaped as llm-d-inference-sim writes it (Prometheus' client, series sorted by
// label values, vllm:lora_requests_info valued with whole seconds), around the given series lines.
func simMetrics(running int, lora ...string) string {
	var b strings.Builder
	b.WriteString("# HELP vllm:lora_requests_info Running stats on lora requests.\n# TYPE vllm:lora_requests_info gauge\n")
	for _, l := range lora {
		b.WriteString(l + "\n")
	}
	b.WriteString("# HELP vllm:num_requests_running Number of requests currently running on GPU.\n# TYPE vllm:num_requests_running gauge\n")
	fmt.Fprintf(&b, "vllm:num_requests_running{model_name=\"m\"} %d\n", running)
	b.WriteString("# HELP vllm:num_requests_waiting Prometheus metric for the number of queued requests.\n# TYPE vllm:num_requests_waiting gauge\n")
	b.WriteString("vllm:num_requests_waiting{model_name=\"m\"} 0\n")
	return b.String()
}

func loraSeries(running, waiting string, stamp int) string {
	return fmt.Sprintf(`vllm:lora_requests_info{max_lora="2",running_lora_adapters=%q,waiting_lora_adapters=%q} %d`, running, waiting, stamp)
}

func TestParseMetricsLoraTies(t *testing.T) {
	const now = 1764636000 // a whole second, as the simulator stamps
	for _, tc := range []struct {
		name string
		in   string
		want []string
	}{
		// a1 ran, then a2 joined and a1 left within one second: sorted by label, "a2" is last, but
		// which came last cannot be told: both are believed to run.
		{"tie while busy", simMetrics(2,
			loraSeries("", "", now-40),
			loraSeries("a1", "", now),
			loraSeries("a1,a2", "", now-3),
			loraSeries("a2", "", now)), []string{"a1", "a2"}},
		// The simulator joins a set in map order: one set has two spellings, counted once.
		{"same set two spellings", simMetrics(2,
			loraSeries("a1,a2", "", now),
			loraSeries("a2,a1", "", now)), []string{"a1", "a2"}},
		// a1's last call ended in the second its first began: "" and "a1" tie. The replica runs
		// nothing, so nothing holds its slots (the last tied line, "a1", held one for good).
		{"tie after the last call", simMetrics(0,
			loraSeries("", "", now),
			loraSeries("a1", "", now)), nil},
		{"latest wins over an older, later line", simMetrics(1,
			loraSeries("a1", "", now),
			loraSeries("a2", "a3", now-1)), []string{"a1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMetrics(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got.Adapters) != fmt.Sprint(tc.want) {
				t.Errorf("adapters %q, want %q", got.Adapters, tc.want)
			}
		})
	}
}

// A replica that went idle in the second its adapter's last call ended shows a tie between the adapter's
// set and the empty one for as long as it stays idle. Believing the adapter there kept every other
// adapter off the replica's one slot (one replica of four never used, in the run issue 43 reports).
func TestScrapeOfAnIdleTieFreesTheSlot(t *testing.T) {
	const now = 1764636000
	tied := simMetrics(0, loraSeries("", "", now), loraSeries("old", "", now))
	var srv [2]*httptest.Server
	for i := range srv {
		body := tied
		if i == 1 {
			body = simMetrics(1, loraSeries("busy", "", now))
		}
		srv[i] = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, body)
		}))
		defer srv[i].Close()
	}
	f, err := New(Config{MaxLoras: 1}, []string{srv[0].URL + "/v1", srv[1].URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	f.Scrape(context.Background(), &http.Client{Timeout: time.Second})
	if st := f.States(); len(st[0].Adapters) != 0 || fmt.Sprint(st[1].Adapters) != "[busy]" {
		t.Fatalf("scraped %q and %q", st[0].Adapters, st[1].Adapters)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pk, err := f.PickWait(ctx, Request{Adapter: "new"})
	if err != nil {
		t.Fatalf("a call of a new adapter with the idle replica's slot free: %v", err)
	}
	if pk.Replica.URL != srv[0].URL+"/v1" {
		t.Errorf("went to %s, not the idle replica", pk.Replica.Addr)
	}
	f.Done(pk, OK)
}

// /metrics captured from llm-d-inference-sim (eec055a, --max-loras 2, adapters a1-a3, five calls at
// once three times over; docs/LORA.md): while busy, and once every call had ended. Idle, five series
// tie for the latest second, the last by label naming a3 and a1: the last tied line kept both holding
// the replica's two slots while it ran nothing.
func TestParseMetricsOfTheSimulator(t *testing.T) {
	for _, tc := range []struct {
		file    string
		running int
		want    []string
	}{
		{"testdata/sim-metrics-busy.txt", 3, []string{"a1", "a3"}},
		{"testdata/sim-metrics-idle.txt", 0, nil},
	} {
		f, err := os.Open(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		l, err := ParseMetrics(f)
		f.Close()
		if err != nil || !l.Found || l.Running != tc.running {
			t.Fatalf("%s: %+v, %v", tc.file, l, err)
		}
		if fmt.Sprint(l.Adapters) != fmt.Sprint(tc.want) {
			t.Errorf("%s: adapters %q, want %q", tc.file, l.Adapters, tc.want)
		}
	}
}

// TestScrapeEjectsAReplicaThatIsGone: a replica whose process died (its port refuses connections) is
// out after one scrape, with no call sent to it, and says why; one without /metrics (404) stays in.
func TestScrapeEjectsAReplicaThatIsGone(t *testing.T) {
	bare := httptest.NewServer(http.NotFoundHandler())
	defer bare.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	// A busy replica whose /metrics answer is cut short after its 200 is up all the same.
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000")
		w.Write([]byte("vllm:num_requests_running{model_name=\"m\"} 1\n"))
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	}))
	defer cut.Close()
	f, err := New(Config{}, []string{bare.URL + "/v1", gone.URL + "/v1", cut.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	f.Scrape(context.Background(), &http.Client{Timeout: time.Second})
	st := f.States()
	if !st[0].Healthy || st[0].Out != "" {
		t.Errorf("a replica answering 404 on /metrics: %+v, want healthy", st[0])
	}
	if st[1].Healthy || st[1].Out != "connection refused (its /metrics)" || st[1].Ejections != 1 || st[1].OutUntil.IsZero() {
		t.Errorf("a replica whose port is closed: %+v, want out for a refused connection", st[1])
	}
	if !st[2].Healthy || st[2].Out != "" {
		t.Errorf("a replica whose /metrics answer was cut after its 200: %+v, want healthy", st[2])
	}
	for range 4 {
		pk := mustPick(t, f, Request{})
		if !pk.Replica.healthy || pk.Replica.Addr == st[1].Addr {
			t.Fatalf("picked %s, which is out", pk.Replica.Addr)
		}
		f.Done(pk, OK)
	}
}

// TestFailSaysWhy: a call's failure names why its replica is out until a probe takes it back.
func TestFailSaysWhy(t *testing.T) {
	f := newFleet(t, Config{}, 2)
	pk := mustPick(t, f, Request{})
	f.Fail(pk, "answered 503")
	if s := f.States()[pk.Replica.pos]; s.Healthy || s.Out != "answered 503" {
		t.Errorf("after Fail: %+v", s)
	}
}
