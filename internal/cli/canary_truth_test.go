package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/server"
)

// truthModels are two simulated models of different speed: every call of sim-fast takes about 255 ms,
// every call of sim-slow about 365 ms.
const truthModels = `models:
  - name: sim-fast
    runtime: simulator
    public: true
    default: true
    simulator: {mode: lorem, loremTokens: 2, ttftMs: 255, itlMs: 0}
  - name: sim-slow
    runtime: simulator
    public: true
    simulator: {mode: lorem, loremTokens: 2, ttftMs: 365, itlMs: 0}
`

// A split canary between a 255 ms and a 365 ms model: usage by arm, the canary's compare (the API's
// JSON through the CLI, and its table) and the deployment's usage each read p50 within 2% of the median
// of the stored runs, per arm, without "about"; then a burst of wrong-key calls is counted as refused
// and leaves every percentile as it was. (Before the sketches both arms read "about 375 / 488 ms" and
// six 401s moved an hour's p50 to 21 ms.)
func TestCanaryCompareReadsEachArmsMedian(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(truthModels), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"),
		ModelsFile: models, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	run := func(args ...string) string {
		t.Helper()
		out, _, _, err := runForTest(t, append(args, "--api", srv.BaseURL)...)
		if err != nil {
			t.Fatalf("svc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	runJSON := func(v any, args ...string) {
		t.Helper()
		out := run(append(args, "--json")...)
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("svc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	var d cloudapi.Deployment
	runJSON(&d, "deployments", "create", "--slug", "truth", "--target", "base:sim-fast")
	var key cloudapi.IssuedKey
	runJSON(&key, "keys", "issue", "truth", "--label", "app")
	runJSON(&d, "deployments", "canary", "set", "truth", "--target", "base:sim-slow", "--percent", "50")
	if d.Canary == nil || d.Canary.ID == "" || d.Canary.StartedAt.IsZero() {
		t.Fatalf("the canary set has no id or start: %+v", d.Canary)
	}

	callAll := func(n int, bearer string, want int) {
		t.Helper()
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for i := range n {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/truth/v1/chat/completions",
					strings.NewReader(fmt.Sprintf(`{"user":"user-%d","messages":[{"role":"user","content":"hi"}]}`, i)))
				req.Header.Set("Authorization", "Bearer "+bearer)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("call %d: status %d, want %d", i, resp.StatusCode, want)
				}
			}()
		}
		wg.Wait()
	}
	const calls = 40
	callAll(calls, key.Plaintext, http.StatusOK)
	srv.Flush()

	// The stored runs' median per arm (and of all of them): the value of rank (n-1)/2, as the API's.
	var page cloudapi.RunPage
	runJSON(&page, "runs", "list", "truth", "--limit", "200")
	if len(page.Runs) != calls {
		t.Fatalf("%d runs stored, want %d", len(page.Runs), calls)
	}
	byArm := map[string][]int64{}
	for _, r := range page.Runs {
		byArm[r.Arm] = append(byArm[r.Arm], r.LatencyMs)
		byArm[""] = append(byArm[""], r.LatencyMs)
	}
	median := func(arm string) float64 {
		v := slices.Sorted(slices.Values(byArm[arm]))
		if len(v) == 0 {
			t.Fatalf("no runs on the %s arm", arm)
		}
		return float64(v[(len(v)-1)/2])
	}
	near := func(what string, got *int64, errPct *int, want float64) {
		t.Helper()
		if got == nil || errPct == nil {
			t.Fatalf("%s: p50 %v, error %v", what, got, errPct)
		}
		if rel := math.Abs(float64(*got)-want) / want; rel > 0.02 || *errPct != 1 {
			t.Errorf("%s: p50 %d ms (error %d%%), the stored runs' median %.0f ms: %.1f%% off", what, *got, *errPct, want, 100*rel)
		}
	}
	fast, slow := median(cloudapi.ArmPrimary), median(cloudapi.ArmCanary)
	if fast < 250 || fast > 300 || slow < 360 || slow > 420 {
		t.Fatalf("the simulators answered in %.0f and %.0f ms, not about 255 and 365", fast, slow)
	}

	// The canary's compare, as the API answers it (the CLI's --json prints it as it came).
	var cmp cloudapi.CanaryRecord
	runJSON(&cmp, "deployments", "canary", "compare", "truth")
	if cmp.ID == "" || cmp.ID != d.Canary.ID || cmp.Outcome != cloudapi.CanaryRunning {
		t.Fatalf("compare of canary %q, outcome %q", cmp.ID, cmp.Outcome)
	}
	p, c := cmp.Arm(cloudapi.ArmPrimary), cmp.Arm(cloudapi.ArmCanary)
	if p == nil || c == nil || p.Requests+c.Requests != calls {
		t.Fatalf("compare: %+v", cmp.Compare)
	}
	near("compare, primary", p.LatencyP50Ms, p.LatencyErrorPct, fast)
	near("compare, canary", c.LatencyP50Ms, c.LatencyErrorPct, slow)

	// The CLI's table says the same numbers, without "about".
	table := run("deployments", "canary", "compare", "truth", cmp.ID)
	for _, a := range []*cloudapi.CanaryArm{p, c} {
		line := lineStarting(table, a.Arm)
		if !strings.Contains(line, fmt.Sprintf("%d ms", *a.LatencyP50Ms)) || strings.Contains(table, "about") {
			t.Errorf("compare table, %s: %q\n%s", a.Arm, line, table)
		}
	}

	// Usage by arm over the last day.
	var arms cloudapi.UsageByArm
	runJSON(&arms, "deployments", "canary", "compare", "truth", "--days", "1")
	for _, a := range arms.Arms {
		near("usage by arm, "+a.Arm, a.Totals.LatencyP50Ms, a.Totals.LatencyErrorPct, median(a.Arm))
	}

	// The deployment's usage: one bucket (a UTC day) holds the calls.
	usage := func() (p50, p95 int64, refused int64) {
		t.Helper()
		var u cloudapi.Usage
		runJSON(&u, "usage", "truth", "--days", "2")
		n := 0
		for _, b := range u.Buckets {
			if b.Requests == 0 {
				continue
			}
			n++
			near("usage", b.LatencyP50Ms, b.LatencyErrorPct, median(""))
			p50, p95, refused = *b.LatencyP50Ms, *b.LatencyP95Ms, b.Refused[401]
		}
		if n != 1 {
			t.Skipf("the calls straddle midnight UTC (%d buckets)", n)
		}
		return p50, p95, refused
	}
	p50, p95, _ := usage()

	// A burst of wrong-key calls: counted as refused, in no percentile.
	callAll(6, "sk-wrong", http.StatusUnauthorized)
	srv.Flush()
	p50After, p95After, refused := usage()
	if refused != 6 || p50After != p50 || p95After != p95 {
		t.Fatalf("after 6 wrong-key calls: refused %d, p50 %d -> %d, p95 %d -> %d", refused, p50, p50After, p95, p95After)
	}
	var again cloudapi.CanaryRecord
	runJSON(&again, "deployments", "canary", "compare", "truth", cmp.ID)
	if a := again.Arm(cloudapi.ArmPrimary); *a.LatencyP50Ms != *p.LatencyP50Ms || a.Requests != p.Requests {
		t.Fatalf("the wrong-key calls moved the compare: %+v", a)
	}
}

// lineStarting is the first row of a table whose first column is word.
func lineStarting(table, word string) string {
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, word+"  ") {
			return l
		}
	}
	return ""
}
