package e2e

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/dataset"
)

// A thumbs-down on a run in its dialog is kept with the run and marked in the runs list; Export
// downloads the runs as a fine-tuning file whose lines OpenAI's format takes, says what it wrote and
// left out, and shows an error under its button; at a laptop's and a phone's width.
func TestFeedbackAndExportJourney(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "scored", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		k, err := cl.IssueDeploymentKey(ctx, d.ID, "ci")
		e.must(err)
		// A call refused as bad input is a failed run: listed, but left out of the export (and counted).
		for _, body := range []string{`{"messages": "not a list"}`, `{"messages": [{"role": "user", "content": "A first question"}]}`,
			`{"messages": [{"role": "user", "content": "A second question"}]}`} {
			req, err := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/scored/v1/chat/completions", strings.NewReader(body))
			e.must(err)
			req.Header.Set("Authorization", "Bearer "+k.Plaintext)
			resp, err := http.DefaultClient.Do(req)
			e.must(err)
			resp.Body.Close()
		}
		e.api.Flush()

		e.open("#/endpoints/" + d.ID + "/runs")
		row := e.testid("run-row")
		e.must(expect.Locator(row).ToHaveCount(3))
		e.must(row.First().GetByTestId("run-open").Click())
		detail := e.testid("run-detail")
		e.must(expect.Locator(detail).ToBeVisible())
		down := detail.GetByTestId("run-feedback--1")
		e.must(expect.Locator(down).ToHaveAttribute("aria-pressed", "false"))
		e.must(down.Click())
		e.must(expect.Locator(detail.GetByTestId("run-feedback--1")).ToHaveAttribute("aria-pressed", "true"))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-given")).ToHaveText("Marked bad"))
		e.snap("run-feedback")
		runID, err := detail.GetAttribute("data-run-id")
		e.must(err)
		run, err := cl.GetRun(ctx, d.ID, runID)
		e.must(err)
		if run.Feedback == nil || run.Feedback.Score != -1 {
			t.Fatalf("run %s keeps feedback %+v", runID, run.Feedback)
		}
		e.must(e.page.Keyboard().Press("Escape"))
		e.must(e.testid("runs-refresh").Click())
		e.must(expect.Locator(e.testid("run-feedback-mark")).ToHaveCount(1))
		e.must(expect.Locator(e.testid("run-feedback-mark")).ToHaveAttribute("data-score", "-1"))

		// Export: the filters, then the file, which the browser downloads from the studio's link as it
		// streams (no blob in the page); the counts the API sends after the last line show under the
		// button once the download has ended.
		e.must(e.testid("runs-export").Locator("summary").Click())
		e.must(expect.Locator(e.testid("runs-export-form")).ToBeVisible())
		e.snap("runs-export")
		download, err := e.page.ExpectDownload(func() error { return e.testid("export-download").Click() })
		e.must(err)
		if got := download.SuggestedFilename(); got != "scored-runs.jsonl" {
			t.Errorf("the download is named %q, want scored-runs.jsonl", got)
		}
		if u := download.URL(); !strings.Contains(u, "/api/deployments/"+d.ID+"/runs/export?") || strings.Contains(u, "blob:") {
			t.Errorf("the download came from %s, not the studio's export link", u)
		}
		path, err := download.Path()
		e.must(err)
		f, err := os.Open(path)
		e.must(err)
		defer f.Close()
		var lines []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if len(lines) != 2 {
			t.Fatalf("the export holds %d lines, want 2", len(lines))
		}
		for i, l := range lines {
			if err := dataset.ValidateChatLine([]byte(l)); err != nil {
				t.Errorf("%v: %s", err, l)
			}
			if want := []string{"A first question", "A second question"}[i]; !strings.Contains(l, want) {
				t.Errorf("line %d is not the run of %q: %s", i+1, want, l)
			}
		}
		e.must(expect.Locator(e.testid("export-done")).ToHaveText("Saved 2 runs in scored-runs.jsonl; 1 left out: 1 failed."))
		e.snap("runs-exported")

		// An error before the first line shows under the button, and nothing is downloaded: the
		// endpoint deleted meanwhile is the studio's 404.
		e.must(cl.DeleteDeployment(ctx, d.ID))
		e.must(e.testid("export-download").Click())
		alert := e.testid("export-status-line").GetByTestId("error")
		e.must(expect.Locator(alert).ToBeVisible())
		e.must(expect.Locator(alert).ToHaveAttribute("data-code", "not_found"))
		e.must(expect.Locator(e.testid("export-done")).ToHaveCount(0))
		e.snap("runs-export-error")
	})
}
