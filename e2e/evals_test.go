package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/server"
)

// A canary under a promotion gate: Promote is refused under its button (409 eval_required) with an
// override reason; the canary card links its candidate's evals, the form defaults to that candidate,
// the eval's progress bar moves until it is done, the summary and the pairs show side by side and
// filter by check; then Promote goes through the gate; at a laptop's and a phone's width.
func TestEvalFromTheCanaryCardThroughTheGate(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "gated", AuthMode: cloudapi.AuthNone, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		_, err = cl.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{
			PromoteGate: cloudapi.GateUpdate{Gate: &cloudapi.PromoteGate{MinWinRate: 0, MaxAgeHours: 72}}})
		e.must(err)
		_, err = cl.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen3-8b"},
			Percent: 10, Mode: cloudapi.CanarySplit})
		e.must(err)
		const calls = 12
		for i := range calls {
			req, _ := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/gated/v1/chat/completions",
				strings.NewReader(fmt.Sprintf(`{"user":"s-%d","messages":[{"role":"user","content":"question %d"}]}`, i, i)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			e.must(err)
			resp.Body.Close()
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			e.api.Flush()
			page, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Status: "ok"})
			e.must(err)
			if len(page.Runs) == calls {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d runs stored, want %d", len(page.Runs), calls)
			}
		}

		// The card says the gate; Promote without an eval is refused under the button.
		e.open("#/endpoints/" + d.ID + "/canary")
		e.must(expect.Locator(e.testid("canary-gate")).ToContainText("Promote gate: a done eval of the candidate with no check regressed, at most 72 h old"))
		e.must(e.testid("canary-promote").Click())
		refused := e.testid("canary-gate-refused")
		e.must(expect.Locator(refused).ToBeVisible())
		e.must(expect.Locator(e.testid("canary-gate-message")).ToContainText("The promotion gate needs a done eval of"))
		e.must(expect.Locator(e.testid("canary-override-reason")).ToBeVisible())
		e.snap("gate-refused")

		// The card's link opens the Evals section with the canary's target as the candidate.
		e.must(e.testid("canary-evals").Click())
		e.must(expect.Locator(e.testid("tab-evals")).ToHaveAttribute("aria-current", "page"))
		e.must(expect.Locator(e.testid("eval-candidate")).ToHaveValue("base:sim-qwen3-8b"))
		e.must(expect.Locator(e.testid("evals-empty")).ToBeVisible())
		e.snap("eval-form")
		e.must(e.testid("eval-start").Click())

		// Its progress, then its summary: every pair replayed, checks side by side.
		detail := e.testid("eval-detail")
		e.must(expect.Locator(detail).ToBeVisible())
		e.must(expect.Locator(e.testid("eval-candidate-shown")).ToHaveText("base:sim-qwen3-8b"))
		e.must(expect.Locator(detail).ToHaveAttribute("data-state", "done", playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(30000)}))
		evalID, err := detail.GetAttribute("data-eval-id")
		e.must(err)
		e.must(expect.Page(e.page).ToHaveURL(e.url + "#/endpoints/" + d.ID + "/evals?eval=" + evalID))
		e.must(expect.Locator(e.testid("eval-progress-text")).ToHaveText(fmt.Sprintf("%d of %d runs replayed", calls, calls)))
		e.must(expect.Locator(e.testid("eval-verdict")).ToContainText("Passed"))
		e.must(expect.Locator(e.testid("eval-pairs-count")).ToContainText(fmt.Sprintf("%d,", calls)))
		e.must(expect.Locator(e.testid("eval-check-row").First()).ToBeVisible())
		e.must(expect.Locator(e.testid("eval-row")).ToHaveCount(1))
		e.must(expect.Locator(e.testid("eval-row").GetByTestId("eval-state")).ToHaveText("passed"))

		// The pairs side by side: the recorded answer and the candidate's, for each source run.
		e.must(expect.Locator(e.testid("eval-pair")).ToHaveCount(calls))
		first := e.testid("eval-pair").First()
		e.must(expect.Locator(first.GetByTestId("eval-pair-baseline")).ToContainText("question"))
		e.must(expect.Locator(first.GetByTestId("eval-pair-candidate")).ToContainText("question"))
		e.snap("eval-done")
		// The eval's address opens it again.
		_, err = e.page.Reload()
		e.must(err)
		e.must(expect.Locator(e.testid("eval-detail")).ToHaveAttribute("data-eval-id", evalID))
		e.must(expect.Locator(e.testid("eval-pair")).ToHaveCount(calls))
		// A check filter: pairs where a side failed it (none failed the finish reason here).
		checks, err := e.testid("eval-filter-check").Locator("option").Count()
		e.must(err)
		if checks < 2 {
			t.Fatalf("the check filter offers %d options", checks)
		}
		value, err := e.testid("eval-filter-check").Locator("option").Nth(1).GetAttribute("value")
		e.must(err)
		_, err = e.testid("eval-filter-check").SelectOption(playwright.SelectOptionValues{Values: &[]string{value}})
		e.must(err)
		e.must(expect.Locator(e.testid("eval-pairs-shown")).ToHaveText(fmt.Sprintf("0 of %d pairs shown.", calls)))
		e.must(expect.Locator(e.testid("eval-pair")).ToHaveCount(0))

		// Through the gate: Promote now makes the candidate the target.
		e.section("canary")
		e.must(e.testid("canary-promote").Click())
		e.must(expect.Locator(e.testid("canary-promote")).ToHaveCount(0))
		got, err := cl.GetDeployment(ctx, d.ID)
		e.must(err)
		if got.Canary != nil || got.Target.Model != "sim-qwen3-8b" {
			t.Fatalf("after promote: target %+v, canary %+v", got.Target, got.Canary)
		}
		e.snap("promoted")
	})
}

// Promote anyway: the gate's refusal takes a reason, the canary is promoted, and its history keeps why.
func TestCanaryOverrideRecordsItsReason(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "overridden", AuthMode: cloudapi.AuthNone, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		_, err = cl.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{
			PromoteGate: cloudapi.GateUpdate{Gate: &cloudapi.PromoteGate{MinWinRate: 0.5, MaxAgeHours: 72}}})
		e.must(err)
		_, err = cl.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen3-8b"},
			Percent: 10, Mode: cloudapi.CanarySplit})
		e.must(err)
		e.open("#/endpoints/" + d.ID + "/canary")
		e.must(e.testid("canary-promote").Click())
		e.must(expect.Locator(e.testid("canary-gate-refused")).ToBeVisible())
		e.must(e.testid("canary-override-reason").Fill("hotfix for a customer outage"))
		e.must(e.testid("canary-override").Click())
		e.must(expect.Locator(e.testid("canary-form")).ToBeVisible())
		page, err := cl.ListCanaries(ctx, d.ID)
		e.must(err)
		if len(page) != 1 || page[0].Outcome != "promoted" || page[0].OverrideReason != "hotfix for a customer outage" {
			t.Fatalf("the canary history: %+v", page)
		}
	})
}

// A worse candidate (a simulator whose structured output breaks on half the conversations): the eval
// says it did not pass and which check regressed, the json check's failures filter the pairs, whose
// candidate side marks the words that differ, and the gate then refuses promote with the eval's reason;
// at a laptop's and a phone's width.
func TestEvalOfAWorseCandidateShowsTheRegression(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(`models:
  - name: sim-base
    runtime: simulator
    public: true
    simulator: {mode: echo}
  - name: sim-faulty
    runtime: simulator
    public: true
    simulator: {mode: echo, faultShare: 0.5}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, w := range journeyWidths {
		t.Run(fmt.Sprintf("%dpx", w), func(t *testing.T) {
			e := newEnvServing(t, nil, func(cfg *server.Config) { cfg.ModelsFile = models })
			e.width = w
			e.must(e.page.SetViewportSize(w, 900))
			ctx := context.Background()
			cl, err := e.local.ScopedClient(ctx)
			e.must(err)
			d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
				Slug: "worse", AuthMode: cloudapi.AuthNone, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-base"},
			})
			e.must(err)
			_, err = cl.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{
				PromoteGate: cloudapi.GateUpdate{Gate: &cloudapi.PromoteGate{MinWinRate: 0, MaxAgeHours: 72}}})
			e.must(err)
			_, err = cl.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-faulty"},
				Percent: 1, Mode: cloudapi.CanarySplit})
			e.must(err)
			schema := `{"type":"json_schema","json_schema":{"name":"answer","schema":{"type":"object","properties":{"answer":{"type":"string"},"n":{"type":"integer"}},"required":["answer","n"]}}}`
			const calls = 16
			for i := range calls {
				// A session the 1% canary does not answer: every run is the primary's.
				req, _ := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/worse/v1/chat/completions",
					strings.NewReader(fmt.Sprintf(`{"response_format":%s,"messages":[{"role":"user","content":"json please %d"}]}`, schema, i)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				e.must(err)
				resp.Body.Close()
			}
			var primary int
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				e.api.Flush()
				page, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Arm: cloudapi.ArmPrimary, Status: "ok"})
				e.must(err)
				all, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
				e.must(err)
				if primary = len(page.Runs); len(all.Runs) == calls {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d runs stored, want %d", len(all.Runs), calls)
				}
			}

			e.open("#/endpoints/" + d.ID + "/evals?candidate=base:sim-faulty")
			e.must(expect.Locator(e.testid("eval-candidate")).ToHaveValue("base:sim-faulty"))
			_, err = e.testid("eval-arm").SelectOption(playwright.SelectOptionValues{Values: &[]string{"primary"}})
			e.must(err)
			e.must(e.testid("eval-start").Click())
			detail := e.testid("eval-detail")
			e.must(expect.Locator(detail).ToHaveAttribute("data-state", "done", playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(30000)}))
			e.must(expect.Locator(e.testid("eval-verdict")).ToHaveText("Not passed: the candidate regressed on json."))
			json := e.page.Locator("[data-testid=eval-check-row][data-check=json]")
			e.must(expect.Locator(json).ToHaveClass(regexp.MustCompile(`regressed`)))
			e.must(expect.Locator(json.GetByTestId("eval-check-candidate")).Not().ToContainText("100%"))
			e.snap("eval-regressed")

			// The pairs whose json check failed: each shows the candidate's broken answer with its
			// differing words marked.
			_, err = e.testid("eval-filter-check").SelectOption(playwright.SelectOptionValues{Values: &[]string{"json"}})
			e.must(err)
			e.must(expect.Locator(e.testid("eval-pairs-shown")).Not().ToHaveText(fmt.Sprintf("%d of %d pairs shown.", primary, primary)))
			pairs := e.testid("eval-pair")
			e.must(expect.Locator(pairs.First()).ToBeVisible())
			n, err := pairs.Count()
			e.must(err)
			if n == 0 || n == primary {
				t.Fatalf("%d of %d pairs failed json", n, primary)
			}
			e.must(expect.Locator(pairs.First().GetByTestId("eval-pair-failed")).ToContainText([]string{"json (candidate)"}))
			e.must(expect.Locator(pairs.First().GetByTestId("eval-pair-candidate").Locator("ins, del").First()).ToBeVisible())
			e.snap("eval-pairs-json")

			// The gate refuses promote with the eval's reason.
			// A click that lands while the section is still being swapped in is lost (seen once in a
			// loaded full run): the refusal changes nothing, so the click is made again then.
			e.section("canary")
			promote := e.testid("canary-promote")
			e.must(expect.Locator(promote).ToBeEnabled())
			for try := 1; ; try++ {
				e.must(promote.Click())
				err := expect.Locator(e.testid("canary-gate-message")).ToContainText("json",
					playwright.LocatorAssertionsToContainTextOptions{Timeout: playwright.Float(10000)})
				if err == nil || try == 2 {
					e.must(err)
					break
				}
			}
			e.snap("gate-refused-regression")
		})
	}
}
