package edge_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// syncBuffer is a log written by the server while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the log's lines so far, decoded.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// An upstream that fails every request for a while (the storm of issue 21: one WARN line per 503,
// 121k lines in 21 s) writes a bounded log: the first failure's line, then a count per interval, and
// the counts account for every failure.
func TestUpstreamFailureStormLogIsBounded(t *testing.T) {
	var log syncBuffer
	const every = 300 * time.Millisecond
	e := newEnvWith(t, envOptions{logTo: &log, logEvery: every})
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, FailStatus: 503,
		FailBody: `{"error":{"message":"overloaded","type":"server_error","code":null}}`})
	e.deploy("storm", base("up"), cloudapi.AuthNone, cloudapi.RetentionNone, 0)
	url := "http://storm." + e.srv.EndpointDomain + "/v1/chat/completions"
	body := []byte(`{"messages":[{"role":"user","content":"hi"}]}`)

	const failures, workers = 10_000, 16
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range failures / workers {
				resp, err := e.client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					t.Errorf("status %d, want the upstream's 503", resp.StatusCode)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	storm := time.Since(start)

	// The last count line comes when the storm's last interval ends.
	var full, counts, counted int
	var lines []map[string]any
	for deadline := time.Now().Add(10 * every); ; {
		lines = log.lines(t)
		full, counts, counted = 0, 0, 0
		for _, l := range lines {
			msg, _ := l["msg"].(string)
			switch {
			case msg == "edge":
				full++
				counted++
				if l["deployment"] != "storm" || l["status"] != 503.0 || l["level"] != "WARN" {
					t.Errorf("the failure's line: %v", l)
				}
			case strings.HasPrefix(msg, "edge: … "):
				counts++
				counted += int(l["repeats"].(float64))
			}
		}
		if counted >= failures || time.Now().After(deadline) {
			break
		}
		time.Sleep(every / 3)
	}
	t.Logf("%d failures in %v: %d log lines (%d in full, %d counts)", failures, storm.Round(time.Millisecond), len(lines), full, counts)
	if counted != failures {
		t.Errorf("the log accounts for %d failures, want exactly %d", counted, failures)
	}
	// At most one count line an interval (the storm's, and the one that ends after it), whatever the
	// number of failures: a slow machine stretches the storm and so the lines, never per failure.
	bound := int(storm/every) + 3
	if len(lines) > bound || len(lines) >= failures/20 || full != 1 || counts == 0 {
		t.Errorf("%d lines, %d of them in full and %d counts: want at most %d (one an interval of a %v storm) and far fewer than the %d failures, the first failure in full, then counts",
			len(lines), full, counts, bound, storm.Round(time.Millisecond), failures)
	}
}

// A known endpoint's refusals (no route, wrong method, wrong key) are logged under its slug; an unknown
// slug is logged under none (its name is the caller's, unbounded).
func TestRefusalsOfAKnownEndpointNameIt(t *testing.T) {
	var log syncBuffer
	e := newEnvWith(t, envOptions{logTo: &log, logLevel: -4})
	_, key := e.deploy("named", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.do("POST", "named", "/v1/nothing", key, map[string]any{})
	e.do("GET", "named", "/v1/chat/completions", key, nil)
	e.do("POST", "named", "/v1/chat/completions", "sk-wrong", map[string]any{})
	e.do("POST", "nobody", "/v1/chat/completions", key, map[string]any{})
	want := map[float64]string{404: "named", 405: "named", 401: "named"}
	seen := map[float64]bool{}
	for _, l := range log.lines(t) {
		if l["msg"] != "edge" {
			continue
		}
		status := l["status"].(float64)
		if l["route"] == "/v1/chat/completions" && status == 404 {
			if l["deployment"] != "" {
				t.Errorf("unknown slug logged as %v", l["deployment"])
			}
			continue
		}
		if slug, ok := want[status]; ok {
			seen[status] = true
			if l["deployment"] != slug {
				t.Errorf("%v logged with deployment %q: %v", status, l["deployment"], l)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("saw %v of the refusals in the log", seen)
	}
}
