package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/server"
)

// speedModels are two simulated models of different speed: about 255 ms and 365 ms a call.
const speedModels = `models:
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

// The canary card tells the truth, at 1280 and 390 px: on a split between a 255 ms and a 365 ms model
// each arm's p50 is within 2% of its stored runs' median, with no "about"; after the split ends and a
// shadow starts on the same target, the card counts the shadow's calls only (none at first) and lists
// the split as ended; promoted from the card, it shows the outcome and the compare it was decided on.
func TestCanaryCardReadsEachArmsMedian(t *testing.T) {
	for _, w := range journeyWidths {
		t.Run(fmt.Sprintf("%dpx", w), func(t *testing.T) {
			models := filepath.Join(t.TempDir(), "models.yaml")
			if err := os.WriteFile(models, []byte(speedModels), 0o600); err != nil {
				t.Fatal(err)
			}
			e := newEnvServing(t, nil, func(c *server.Config) { c.ModelsFile = models })
			e.width = w
			e.must(e.page.SetViewportSize(w, 900))
			canaryCardJourney(t, e)
		})
	}
}

func canaryCardJourney(t *testing.T, e *env) {
	ctx := context.Background()
	cl, err := e.local.ScopedClient(ctx)
	e.must(err)
	d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "speeds", AuthMode: cloudapi.AuthNone,
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-fast"}})
	e.must(err)
	slow := cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-slow"}
	_, err = cl.SetCanary(ctx, d.ID, cloudapi.Canary{Target: slow, Percent: 50, Mode: cloudapi.CanarySplit})
	e.must(err)
	calls := func(n int, prefix string) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/speeds/v1/chat/completions",
					strings.NewReader(fmt.Sprintf(`{"user":"%s-%d","messages":[{"role":"user","content":"hi"}]}`, prefix, i)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("edge call: HTTP %d", resp.StatusCode)
				}
			})
		}
		wg.Wait()
		e.api.Flush()
	}
	calls(24, "split")
	page, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Limit: 100})
	e.must(err)
	byArm := map[string][]int64{}
	for _, r := range page.Runs {
		byArm[r.Arm] = append(byArm[r.Arm], r.LatencyMs)
	}

	e.open("#/endpoints/" + d.ID + "/canary")
	for _, arm := range []string{cloudapi.ArmPrimary, cloudapi.ArmCanary} {
		v := slices.Sorted(slices.Values(byArm[arm]))
		if len(v) == 0 {
			t.Fatalf("no runs on the %s arm", arm)
		}
		median := float64(v[(len(v)-1)/2])
		cell := e.testid("arm-" + arm + "-latency")
		e.must(expect.Locator(cell).ToContainText(" ms"))
		text, err := cell.TextContent()
		e.must(err)
		p50, err := strconv.Atoi(strings.ReplaceAll(strings.Fields(text)[0], ",", ""))
		if err != nil || strings.Contains(text, "about") || math.Abs(float64(p50)-median)/median > 0.02 {
			t.Fatalf("the %s arm reads %q; its runs' median is %.0f ms", arm, text, median)
		}
	}
	e.snap("canary-speeds")

	// End the split, start a shadow on the same target: the card counts the shadow's calls only.
	_, err = cl.EndCanary(ctx, d.ID)
	e.must(err)
	shadow, err := cl.SetCanary(ctx, d.ID, cloudapi.Canary{Target: slow, Percent: 50, Mode: cloudapi.CanaryShadow})
	e.must(err)
	e.open("#/endpoints/" + d.ID)
	e.section("canary")
	e.must(expect.Locator(e.testid("canary-id")).ToHaveText(shadow.Canary.ID))
	e.must(expect.Locator(e.testid("arms-empty")).ToBeVisible())
	e.must(e.testid("canary-past").Locator("summary").Click())
	e.must(expect.Locator(e.testid("canary-past-outcome")).ToHaveText([]string{"Ended"}))

	// Four calls under the shadow (and their copies), then Promote from the card.
	calls(4, "shadow")
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := cl.GetCanary(ctx, d.ID, shadow.Canary.ID)
		e.must(err)
		if a := r.Arm(cloudapi.ArmCanary); a != nil && a.Requests == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shadow's compare after 10 s: %+v", r.Compare)
		}
		time.Sleep(20 * time.Millisecond)
		e.api.Flush()
	}
	e.open("#/endpoints/" + d.ID)
	e.section("canary")
	e.must(expect.Locator(e.testid("arm-canary-requests")).ToHaveText("4"))
	e.must(e.testid("canary-promote").Click())
	outcome := e.testid("canary-outcome")
	e.must(expect.Locator(outcome).ToContainText("Promoted Base model: sim-slow on "))
	e.must(expect.Locator(outcome).ToContainText("canary 4 calls, p50 3"))
	e.must(expect.Locator(outcome.GetByTestId("arm-canary-requests")).ToHaveText("4"))
	e.must(expect.Locator(e.testid("canary-past-outcome")).ToHaveText([]string{"Promoted", "Ended"}))
	e.must(expect.Locator(e.testid("canary-form")).ToBeVisible())
	e.snap("canary-promoted-outcome")
}
