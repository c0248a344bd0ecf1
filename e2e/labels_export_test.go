package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// Two 80-character key labels that differ only at their end stay apart where the studio cuts them (the
// key table, the runs' key filter and column), whole on hover; and the runs card's Export opens inside
// the window with its result line in view, in a 390-wide window, and at 1280x800 the Export button,
// its filters and the result line show at once.
func TestLongLabelsApartAndExportInTheWindow(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		e.must(e.page.SetViewportSize(e.width, 800))
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "labels", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		a := "customer-support-assistant-production-eu-west-1-rotation-2026-11-primary-key-A01"
		b := a[:len(a)-3] + "B01"
		if len(a) != 80 {
			t.Fatalf("label of %d characters", len(a))
		}
		var keyA string
		for _, label := range []string{a, b} {
			k, err := cl.IssueDeploymentKey(ctx, d.ID, label)
			e.must(err)
			if label == a {
				keyA = k.Plaintext
			}
		}
		req, err := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/labels/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		e.must(err)
		req.Header.Set("Authorization", "Bearer "+keyA)
		resp, err := http.DefaultClient.Do(req)
		e.must(err)
		resp.Body.Close()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			e.api.Flush()
			page, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
			e.must(err)
			if len(page.Runs) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the call's run was not recorded")
			}
		}

		e.open("#/endpoints/" + d.ID + "/keys")
		labels := e.testid("key-label")
		e.must(expect.Locator(labels).ToHaveCount(2))
		shown := map[string]bool{}
		for i := 0; i < 2; i++ {
			text, err := labels.Nth(i).InnerText()
			e.must(err)
			title, err := labels.Nth(i).GetAttribute("title")
			e.must(err)
			if !strings.HasSuffix(text, title[len(title)-5:]) || !strings.Contains(text, "…") {
				t.Errorf("the label %q shows as %q: its end is cut", title, text)
			}
			shown[text] = true
		}
		if len(shown) != 2 {
			t.Errorf("two labels that differ at their end show alike: %v", shown)
		}
		e.snap("long-labels")

		e.section("runs")
		e.must(expect.Locator(e.testid("run-key")).ToContainText("key-A01"))
		e.must(expect.Locator(e.testid("runs-filter-key").Locator("option")).ToContainText([]string{"any", "key-A01", "key-B01"}))

		// The Export: inside the window, its result line in view once the click is answered.
		e.must(e.testid("runs-export").Locator("summary").Click())
		form := e.testid("runs-export-form")
		e.must(expect.Locator(form).ToBeVisible())
		box, err := form.BoundingBox()
		e.must(err)
		if box.X < 0 || box.X+box.Width > float64(e.width) {
			t.Errorf("the export form spans x %.0f to %.0f in a %d px window", box.X, box.X+box.Width, e.width)
		}
		e.selectExport("export-format", "preference-jsonl")
		e.selectExport("export-min-score", "1")
		e.must(e.testid("export-download").Click())
		alert := e.testid("export-status-line").GetByTestId("error")
		e.must(expect.Locator(alert).ToContainText("minScore does not apply"))
		e.must(expect.Locator(alert).ToBeInViewport())
		if e.width >= 1280 {
			// A laptop's window holds the Export button, its filters and what became of the click at once.
			e.must(expect.Locator(e.testid("runs-export").Locator("summary")).ToBeInViewport())
			box, err := form.BoundingBox()
			e.must(err)
			if box.Y < 0 || box.Y+box.Height > 800 {
				t.Errorf("the export form spans y %.0f to %.0f in an 800 px high window", box.Y, box.Y+box.Height)
			}
		}
		e.snap("export-open")
	})
}
