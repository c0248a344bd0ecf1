package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/dataset"
)

// The canary journey at 1280 and 390 px: an endpoint serving a job's final adapter gets a canary on
// the job's checkpoint, picked as in the create form; calls of many sessions show both arms side by
// side; a thumbs-down on a run counts under its arm; Export downloads both arms' runs; the list says
// the endpoint has a canary; Promote (confirmed) makes the checkpoint the target; End canary
// (confirmed) ends a shadow canary.
func TestCanaryJourney(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		job := e.registerJob() // a final adapter and a checkpoint at step 100
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "tuned", AuthMode: cloudapi.AuthNone,
			Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: job.ID}})
		e.must(err)

		e.open("#/endpoints/" + d.ID + "/canary")
		e.must(expect.Locator(e.testid("canary-form")).ToBeVisible())
		e.must(e.testid("canary-kind-checkpoint").Check())
		e.must(expect.Locator(e.page.Locator("#canary-job option[value='" + job.ID + "']")).ToHaveCount(1))
		_, err = e.page.Locator("#canary-job").SelectOption(playwright.SelectOptionValues{Values: &[]string{job.ID}})
		e.must(err)
		e.must(expect.Locator(e.page.Locator("#canary-step option[value='100']")).ToHaveCount(1))
		_, err = e.page.Locator("#canary-step").SelectOption(playwright.SelectOptionValues{Values: &[]string{"100"}})
		e.must(err)
		e.must(e.testid("canary-percent").Fill("50"))
		e.snap("canary-form")
		e.must(e.testid("canary-submit").Click())
		e.must(expect.Locator(e.testid("canary-summary")).ToHaveText("Canary: Checkpoint step 100 (job " + job.ID[:8] + ") on 50% of sessions"))
		e.must(expect.Locator(e.testid("arms-empty")).ToBeVisible())
		got, err := cl.GetDeployment(ctx, d.ID)
		e.must(err)
		if got.Canary == nil || got.Canary.Percent != 50 || got.Canary.Target.Step != 100 {
			t.Fatalf("the canary upstream: %+v", got.Canary)
		}

		// Forty sessions call the endpoint; each lands on one arm.
		for i := range 40 {
			req, _ := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/tuned/v1/chat/completions",
				strings.NewReader(fmt.Sprintf(`{"user":"session-%d","messages":[{"role":"user","content":"hi"}]}`, i)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			e.must(err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("edge call: HTTP %d %s", resp.StatusCode, body)
			}
		}
		e.api.Flush()

		// The arms side by side, both answering, adding up to the forty calls.
		e.section("usage")
		e.section("canary")
		primary, canary := e.testid("arm-primary-requests"), e.testid("arm-canary-requests")
		e.must(expect.Locator(primary).ToBeVisible())
		e.must(expect.Locator(canary).ToBeVisible())
		p, c := e.count(primary), e.count(canary)
		if p+c != 40 || p == 0 || c == 0 {
			t.Fatalf("arms: primary %d, canary %d requests; want both, 40 in all", p, c)
		}
		e.must(expect.Locator(e.testid("arm-canary-ttft")).ToContainText("ms"))
		e.must(expect.Locator(e.testid("arm-bar")).Not().ToHaveCount(0))
		e.snap("canary-arms")

		// A run says which arm answered it.
		e.section("runs")
		e.must(e.testid("run-open").First().Click())
		detail := e.testid("run-detail")
		e.must(expect.Locator(detail).ToBeVisible())
		e.must(expect.Locator(detail.GetByTestId("run-arm")).ToContainText("ft-" + job.ID))

		// A thumbs-down on it counts under its arm, and not under the other.
		armText, err := detail.GetByTestId("run-arm").TextContent()
		e.must(err)
		arm, other := cloudapi.ArmPrimary, cloudapi.ArmCanary
		if strings.HasPrefix(strings.TrimSpace(armText), "Canary") {
			arm, other = other, arm
		}
		e.must(detail.GetByTestId("run-feedback--1").Click())
		e.must(expect.Locator(detail.GetByTestId("run-feedback-given")).ToHaveText("Marked bad"))
		e.must(e.page.Keyboard().Press("Escape"))
		e.must(expect.Locator(detail).Not().ToBeVisible())
		e.section("canary")
		e.must(expect.Locator(e.testid("arm-" + arm + "-feedback")).ToHaveText("0 / 1 / 0"))
		e.must(expect.Locator(e.testid("arm-" + other + "-feedback")).ToHaveText("0 / 0 / 0"))
		e.snap("canary-feedback")

		// Export: the runs of both arms, one fine-tuning line each.
		e.section("runs")
		e.must(e.testid("runs-export").Locator("summary").Click())
		download, err := e.page.ExpectDownload(func() error { return e.testid("export-download").Click() })
		e.must(err)
		path, err := download.Path()
		e.must(err)
		exported, err := os.ReadFile(path)
		e.must(err)
		lines := strings.Split(strings.TrimSuffix(string(exported), "\n"), "\n")
		if len(lines) != 40 {
			t.Fatalf("the export holds %d lines, want the 40 calls'", len(lines))
		}
		for i, l := range lines {
			if err := dataset.ValidateChatLine([]byte(l)); err != nil {
				t.Fatalf("line %d: %v: %s", i+1, err, l)
			}
		}
		e.must(expect.Locator(e.testid("export-done")).ToHaveText("Saved 40 runs in tuned-runs.jsonl; none left out."))

		// The list's summary line says the endpoint has a canary.
		e.open("#/endpoints")
		e.must(expect.Locator(e.row("tuned").GetByTestId("canary-summary")).ToContainText("Canary: Checkpoint step 100"))
		e.snap("canary-list")

		// Promote, confirmed: the checkpoint is the target, and the canary card offers a new one.
		e.open("#/endpoints/" + d.ID + "/canary")
		e.must(e.testid("canary-promote").Click())
		e.must(expect.Locator(e.testid("canary-form")).ToBeVisible())
		if msg := e.lastDialog(); !strings.Contains(msg, "Promote the canary of tuned?") {
			t.Fatalf("promote asked %q", msg)
		}
		got, err = cl.GetDeployment(ctx, d.ID)
		e.must(err)
		if got.Canary != nil || got.Target.Kind != cloudapi.TargetCheckpoint || got.Target.Step != 100 {
			t.Fatalf("after promote: %+v", got)
		}
		e.section("overview")
		e.must(expect.Locator(e.testid("target-summary")).ToHaveText("Checkpoint step 100 (job " + job.ID[:8] + ")"))
		e.must(expect.Locator(e.testid("overview-canary")).ToHaveCount(0))
		e.snap("canary-promoted")

		// A shadow canary (set through the SDK) ended from the card, confirmed: the form again.
		_, err = cl.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: job.ID}, Percent: 5, Mode: cloudapi.CanaryShadow})
		e.must(err)
		e.section("canary")
		e.must(expect.Locator(e.testid("canary-summary")).ToContainText("Canary (shadow): Final adapter"))
		e.must(e.testid("canary-end").Click())
		e.must(expect.Locator(e.testid("canary-form")).ToBeVisible())
		if msg := e.lastDialog(); !strings.Contains(msg, "End the canary of tuned?") {
			t.Fatalf("end asked %q", msg)
		}
		if got, err = cl.GetDeployment(ctx, d.ID); err != nil || got.Canary != nil || got.Target.Kind != cloudapi.TargetCheckpoint {
			t.Fatalf("after end: %+v %v", got, err)
		}
	})
}

// count reads a number the page shows ("1,234" included).
func (e *env) count(l playwright.Locator) int {
	e.t.Helper()
	s, err := l.TextContent()
	e.must(err)
	n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(s), ",", ""))
	e.must(err)
	return n
}
