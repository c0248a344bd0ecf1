package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// The Export's filters do what their labels say: "not marked bad" saves the unmarked runs too; the
// preference pairs refuse an arm or a feedback filter under the button, naming them, and count a pair
// of two identical answers instead of saving it; the usage card shows the shadow copies apart from the
// calls; at a laptop's and a phone's width.
func TestExportFiltersSayWhatTheyDo(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		auth := cloudapi.AuthNone
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "filtered", AuthMode: auth, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		// Both models echo: every copy answers as its primary did.
		_, err = cl.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen3-8b"},
			Percent: 10, Mode: cloudapi.CanaryShadow})
		e.must(err)
		for _, q := range []string{"Echoed twice", "Never scored", "Marked bad"} {
			resp, err := http.Post(e.api.BaseURL+"/e/filtered/v1/chat/completions", "application/json",
				strings.NewReader(`{"messages": [{"role": "user", "content": "`+q+`"}]}`))
			e.must(err)
			resp.Body.Close()
		}
		var runs []cloudapi.RunSummary
		for deadline := time.Now().Add(10 * time.Second); len(runs) < 6 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			e.api.Flush()
			page, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
			e.must(err)
			runs = page.Runs
		}
		if len(runs) != 6 {
			t.Fatalf("%d runs, want 3 calls and their 3 copies", len(runs))
		}
		for _, r := range runs {
			run, err := cl.GetRun(ctx, d.ID, r.ID)
			e.must(err)
			switch q := string(run.Request); {
			case strings.Contains(q, "Marked bad") && r.ShadowOf == "":
				_, err = cl.SetRunFeedback(ctx, d.ID, r.ID, cloudapi.SetRunFeedbackRequest{Score: -1})
			case strings.Contains(q, "Echoed twice") && r.ShadowOf == "":
				_, err = cl.SetRunFeedback(ctx, d.ID, r.ID, cloudapi.SetRunFeedbackRequest{Score: 1})
			case strings.Contains(q, "Echoed twice"):
				_, err = cl.SetRunFeedback(ctx, d.ID, r.ID, cloudapi.SetRunFeedbackRequest{Score: -1})
			}
			e.must(err)
		}

		e.open("#/endpoints/" + d.ID + "/runs")
		e.must(expect.Locator(e.testid("run-row")).ToHaveCount(6))
		e.must(e.testid("runs-export").Locator("summary").Click())
		e.must(expect.Locator(e.testid("runs-export-form")).ToBeVisible())

		// Not marked bad: the good run and the unmarked one.
		e.selectExport("export-min-score", "0")
		lines := e.exportDownload(d.ID, "filtered-runs.jsonl")
		if len(lines) != 2 || !strings.Contains(lines[0], "Echoed twice") || !strings.Contains(lines[1], "Never scored") {
			t.Errorf("not marked bad saved %q, want the good run and the unmarked one", lines)
		}
		e.must(expect.Locator(e.testid("export-done")).ToHaveText("Saved 2 runs in filtered-runs.jsonl; none left out."))

		// Preference pairs with a feedback filter: refused under the button, naming it.
		e.selectExport("export-format", "preference-jsonl")
		e.must(e.testid("export-download").Click())
		alert := e.testid("export-status-line").GetByTestId("error")
		e.must(expect.Locator(alert).ToBeVisible())
		e.must(expect.Locator(alert).ToContainText("minScore does not apply to format preference-jsonl"))
		e.selectExport("export-arm", "canary")
		e.must(e.testid("export-download").Click())
		e.must(expect.Locator(alert).ToContainText("Arm and minScore do not apply to format preference-jsonl"))
		e.snap("export-refused")

		// Without them: the one ranked pair has two identical answers, counted and not saved.
		e.selectExport("export-arm", "")
		e.selectExport("export-min-score", "")
		if lines = e.exportDownload(d.ID, "filtered-preferences.jsonl"); len(lines) != 0 {
			t.Errorf("the preference export saved %q, want nothing (its only ranked pair is identical)", lines)
		}
		e.must(expect.Locator(e.testid("export-done")).ToHaveText("Saved 0 pairs in filtered-preferences.jsonl; 3 left out: 2 unranked pairs, 1 identical pairs."))
		e.snap("export-identical")

		// The usage card counts the 3 calls clients made and their feedback; the 3 copies apart.
		e.section("usage")
		e.must(expect.Locator(e.testid("usage-requests")).ToHaveText("3"))
		e.must(expect.Locator(e.testid("usage-feedback")).ToHaveText("Feedback on 2 runs: 1 good, 1 bad"))
		e.must(expect.Locator(e.testid("usage-copies")).ToContainText("Shadow copies 3 ("))
		e.snap("usage-copies")
	})
}
