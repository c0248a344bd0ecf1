// Command svcbench measures the edge's overhead: the same load sent to a mock upstream directly,
// through a bare httputil.ReverseProxy, through `svc server` (key auth and run recording on), and
// through an `svc edge` process in front of that server (docs/DEPLOY.md), in the same run; and, in the
// streamed scenarios, the same deployment's answers through the Messages and Responses APIs, which the
// edge translates to chat completions, each set against its relayed chat stream (CPU per chunk).
//
// It is built to be read on a small, shared machine. Every scenario (non-streamed and streamed answers,
// at -conns connections and at 1) runs in -rounds rounds; in a round, each row (direct, bare proxy, edge,
// edge variants) gets -duration of load in slices of at most 500ms that take turns, in an order that
// rotates from slice to slice, so that noise from elsewhere on the machine (and the work a row leaves
// behind for the next) weighs on all rows alike, and each edge row is compared with the bare proxy
// of the same round. It prints the min / median / max of those per-round ratios, absolute figures
// (medians over rounds; on Linux, the CPU time of the serving process per request too), and the issue's
// budget checks, which are informative only: the exit code does not depend on them. The fleet rows
// (-rows fleet, fleet.go) send three workloads through the edge to fake vLLM replicas under each
// routing and judge affinity by ratios within the run; the KV-events row (-rows kv, kv.go) runs the same
// sessions on llm-d-inference-sim replicas with and without kvEvents (LLMD_SIM). All traffic stays
// on loopback. The run is bounded in time: it prints how long it expects to take, a watchdog ends it at
// twice that plus two minutes, and its helper processes end with it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/bench"
	"github.com/svcdev/svc/internal/mockupstream"
)

type options struct {
	duration  time.Duration
	rounds    int
	conns     int
	tokens    int
	usage     bool
	retention string
	rows      string
	pgOutage  time.Duration // the PostgreSQL ingest row's outage in the middle of its load (0: none)
}

func main() {
	role := flag.String("role", "", "internal: run as the mock upstream (mock), the bare proxy (proxy) or the traces sink (otlp)")
	target := flag.String("target", "", "internal: the bare proxy's upstream")
	duration := flag.Duration("duration", 1500*time.Millisecond, "measurement time of each row in each round (in slices of at most 500ms)")
	rounds := flag.Int("rounds", 5, "interleaved rounds of each scenario (min / median / max need at least 5 to mean much)")
	conns := flag.Int("conns", 16, "concurrent connections of the loaded scenarios (the others use 1)")
	tokens := flag.Int("tokens", 16, "completion tokens of each answer")
	usage := flag.Bool("usage", false, "ask for stream usage (stream_options.include_usage) in streamed requests to every target")
	retention := flag.String("retention", "days", "run retention of the benchmarked deployment (the edge row): days, unlimited or none")
	only := flag.String("rows", "", "measure only the rows whose names contain one of these comma-separated words, or are one for a word written =name (the bare proxy, and a translated row's chat row, always); all when empty")
	pgOutage := flag.Duration("pg-outage", 0, "stop the PostgreSQL ingest row's database for this long in the middle of its load (5 s before, 5 s after), and count the runs stored")
	flag.Parse()
	var err error
	switch *role {
	case "mock":
		exitWithBench()
		err = serve(mockupstream.New(mockupstream.Config{Model: "mock-model", Tokens: *tokens}, false))
	case "otlp":
		exitWithBench()
		err = serve(otlpSink())
	case "proxy":
		exitWithBench()
		var h http.Handler
		if h, err = bench.BareProxy(*target); err == nil {
			err = serve(h)
		}
	case "":
		switch {
		case *rounds < 1:
			err = fmt.Errorf("-rounds must be at least 1")
		case *duration <= 0:
			err = fmt.Errorf("-duration must be positive")
		case *conns < 1:
			err = fmt.Errorf("-conns must be at least 1")
		default:
			err = run(options{duration: *duration, rounds: *rounds, conns: *conns, tokens: *tokens, usage: *usage, retention: *retention, rows: *only, pgOutage: *pgOutage})
		}
	default:
		err = fmt.Errorf("unknown role %q", *role)
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "svcbench: interrupted")
		os.Exit(1)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "svcbench:", err)
		os.Exit(1)
	}
}

// exitWithBench ends a helper process when the bench that started it goes away, however it went
// (its stdin, a pipe from the bench, then closes).
func exitWithBench() {
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
}

// serve listens on a free loopback port, prints its URL on the first line, and serves.
func serve(h http.Handler) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("http://%s\n", ln.Addr())
	return (&http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
}

// otlpSink answers OTLP/HTTP exports (POST /v1/traces) with 200 after reading them, and counts them
// (GET /stats): where the traced edge process sends its spans.
func otlpSink() http.Handler {
	var requests, bytes atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		requests.Add(1)
		bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"requests":%d,"bytes":%d}`, requests.Load(), bytes.Load())
	})
	return mux
}
