package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/dataset"
)

// A thumbs-down on a run in its dialog is kept with the run and marked in the runs list; Export
// downloads the runs as a fine-tuning file whose lines OpenAI's format takes, says what it wrote and
// left out, and shows an error under its button; its filters are the API's (format, arm, until); at a
// laptop's and a phone's width.
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
		lines := e.exportDownload(d.ID, "scored-runs.jsonl")
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

		// The Export's other filters, the API's: on an endpoint with a shadow canary (lorem answers;
		// the primary echoes), two calls make two pairs, one ranked by feedback (the primary's answer
		// preferred): the preference format downloads that pair, the canary arm its two answers, and
		// an until before today nothing.
		p, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "paired", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		_, err = cl.SetCanary(ctx, p.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen2.5-7b-instruct"},
			Percent: 10, Mode: cloudapi.CanaryShadow})
		e.must(err)
		pk, err := cl.IssueDeploymentKey(ctx, p.ID, "ci")
		e.must(err)
		for _, q := range []string{"Which is better", "Unscored question"} {
			req, err := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/paired/v1/chat/completions",
				strings.NewReader(`{"messages": [{"role": "user", "content": "`+q+`"}]}`))
			e.must(err)
			req.Header.Set("Authorization", "Bearer "+pk.Plaintext)
			resp, err := http.DefaultClient.Do(req)
			e.must(err)
			resp.Body.Close()
		}
		var pairs []cloudapi.RunSummary
		for deadline := time.Now().Add(10 * time.Second); len(pairs) < 4 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			e.api.Flush()
			page, err := cl.ListRuns(ctx, p.ID, cloudapi.ListRunsOptions{})
			e.must(err)
			pairs = page.Runs
		}
		ranked := false
		for _, r := range pairs {
			if r.ShadowOf == "" {
				continue
			}
			primary, err := cl.GetRun(ctx, p.ID, r.ShadowOf)
			e.must(err)
			if strings.Contains(string(primary.Request), "Which is better") {
				_, err = cl.SetRunFeedback(ctx, p.ID, primary.ID, cloudapi.SetRunFeedbackRequest{Score: 1})
				e.must(err)
				_, err = cl.SetRunFeedback(ctx, p.ID, r.ID, cloudapi.SetRunFeedbackRequest{Score: -1})
				e.must(err)
				ranked = true
			}
		}
		if len(pairs) != 4 || !ranked {
			t.Fatalf("%d runs of the shadowed endpoint (want 2 calls and 2 copies), the first pair ranked: %v", len(pairs), ranked)
		}

		e.open("#/endpoints/" + p.ID + "/runs")
		e.must(expect.Locator(e.testid("run-row")).ToHaveCount(4))
		e.must(e.testid("runs-export").Locator("summary").Click())
		e.must(expect.Locator(e.testid("runs-export-form")).ToBeVisible())
		e.selectExport("export-format", "preference-jsonl")
		e.selectExport("export-since", "24h")
		e.snap("runs-export-filters")
		lines = e.exportDownload(p.ID, "paired-preferences.jsonl")
		if len(lines) != 1 {
			t.Fatalf("the preference export holds %d lines, want 1: %q", len(lines), lines)
		}
		if err := dataset.ValidatePreferenceLine([]byte(lines[0])); err != nil {
			t.Errorf("%v: %s", err, lines[0])
		}
		var pref struct {
			Input struct {
				Messages []struct{ Content string }
			}
			Preferred    []struct{ Content string } `json:"preferred_output"`
			NonPreferred []struct{ Content string } `json:"non_preferred_output"`
		}
		e.must(json.Unmarshal([]byte(lines[0]), &pref))
		if len(pref.Input.Messages) != 1 || pref.Input.Messages[0].Content != "Which is better" || len(pref.Preferred) != 1 ||
			pref.Preferred[0].Content != "Which is better" || len(pref.NonPreferred) != 1 || pref.NonPreferred[0].Content == "Which is better" {
			t.Errorf("the pair does not prefer the primary's (echoed) answer: %s", lines[0])
		}
		e.must(expect.Locator(e.testid("export-done")).ToHaveText("Saved 1 pair in paired-preferences.jsonl; 1 left out: 1 unranked pairs."))

		e.selectExport("export-format", "chat-jsonl")
		e.selectExport("export-arm", "canary")
		lines = e.exportDownload(p.ID, "paired-runs.jsonl")
		if len(lines) != 2 {
			t.Fatalf("the canary arm's export holds %d lines, want 2: %q", len(lines), lines)
		}
		for i, l := range lines {
			var line struct {
				Messages []struct{ Role, Content string }
			}
			e.must(json.Unmarshal([]byte(l), &line))
			q := []string{"Which is better", "Unscored question"}[i]
			if dataset.ValidateChatLine([]byte(l)) != nil || len(line.Messages) != 2 || line.Messages[0].Content != q ||
				line.Messages[1].Role != "assistant" || line.Messages[1].Content == q {
				t.Errorf("line %d is not the canary's (lorem) answer to %q: %s", i+1, q, l)
			}
		}
		e.must(expect.Locator(e.testid("export-done")).ToHaveText("Saved 2 runs in paired-runs.jsonl; none left out."))

		e.must(e.testid("export-until").Fill(time.Now().AddDate(0, 0, -1).Format(time.DateOnly)))
		if lines = e.exportDownload(p.ID, "paired-runs.jsonl"); len(lines) != 0 {
			t.Errorf("an export up to yesterday holds %d lines of today's runs", len(lines))
		}
		e.must(expect.Locator(e.testid("export-done")).ToHaveText("Saved 0 runs in paired-runs.jsonl; none left out."))
		e.snap("runs-exported-filtered")
	})
}

// selectExport picks an option of one of the Export form's selects.
func (e *env) selectExport(testid, value string) {
	e.t.Helper()
	_, err := e.testid(testid).SelectOption(playwright.SelectOptionValues{Values: &[]string{value}})
	e.must(err)
}

// exportDownload presses the Export's button and returns the lines of the file the browser saved,
// which must be named file and come from the studio's export link of the deployment (no blob in the
// page).
func (e *env) exportDownload(deploymentID, file string) []string {
	e.t.Helper()
	download, err := e.page.ExpectDownload(func() error { return e.testid("export-download").Click() })
	e.must(err)
	if got := download.SuggestedFilename(); got != file {
		e.t.Errorf("the download is named %q, want %s", got, file)
	}
	if u := download.URL(); !strings.Contains(u, "/api/deployments/"+deploymentID+"/runs/export?") || strings.Contains(u, "blob:") {
		e.t.Errorf("the download came from %s, not the studio's export link", u)
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
	e.must(sc.Err())
	return lines
}
