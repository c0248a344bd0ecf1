package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
)

// Feedback a person can read and give in the run dialog: the comment an app sent and when, shown with
// a mark of its own (icon, colour and word); Neutral, Good and Bad with a comment, and Clear; good and
// bad marks in the runs list that do not look alike; a failed run offers no Good or Bad and says why;
// at a laptop's and a phone's width.
func TestFeedbackReadAndGive(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "readable", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		k, err := cl.IssueDeploymentKey(ctx, d.ID, "app")
		e.must(err)
		post := func(path, body string) map[string]any {
			req, err := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/readable/v1"+path, strings.NewReader(body))
			e.must(err)
			req.Header.Set("Authorization", "Bearer "+k.Plaintext)
			resp, err := http.DefaultClient.Do(req)
			e.must(err)
			defer resp.Body.Close()
			var m map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&m)
			return m
		}
		post("/chat/completions", `{"messages": "not a list"}`) // a failed run
		liked, _ := post("/chat/completions", `{"messages": [{"role": "user", "content": "A liked question"}]}`)["id"].(string)
		vague, _ := post("/chat/completions", `{"messages": [{"role": "user", "content": "A vague question"}]}`)["id"].(string)
		// The apps' feedback, through the endpoint with its key.
		if m := post("/feedback", `{"id": "`+vague+`", "score": -1, "comment": "wrong: too vague"}`); m["object"] != "feedback" {
			t.Fatalf("feedback: %v", m)
		}
		if m := post("/feedback", `{"id": "`+liked+`", "score": 1}`); m["object"] != "feedback" {
			t.Fatalf("feedback: %v", m)
		}
		e.api.Flush()

		e.open("#/endpoints/" + d.ID + "/runs")
		rows := e.testid("run-row")
		e.must(expect.Locator(rows).ToHaveCount(3))
		// Good and bad marks in the list: each its icon, word and colour.
		marks := e.testid("run-feedback-mark")
		e.must(expect.Locator(marks).ToHaveCount(2))
		bad, good := rows.Nth(0).GetByTestId("run-feedback-mark"), rows.Nth(1).GetByTestId("run-feedback-mark")
		e.must(expect.Locator(bad).ToHaveText("✗ bad"))
		e.must(expect.Locator(good).ToHaveText("✓ good"))
		colour := func(l playwright.Locator) string {
			v, err := l.Evaluate("el => getComputedStyle(el).color + ' on ' + getComputedStyle(el).backgroundColor", nil)
			e.must(err)
			return v.(string)
		}
		if cb, cg := colour(bad), colour(good); cb == cg {
			t.Errorf("good and bad marks share their colours: %s", cb)
		}
		e.snap("runs-marked")

		// The vague run: the app's comment and its time, its mark.
		e.must(rows.Nth(0).GetByTestId("run-open").Click())
		detail := e.testid("run-detail")
		e.must(expect.Locator(detail).ToBeVisible())
		e.must(expect.Locator(detail.GetByTestId("run-feedback-given")).ToHaveText("Marked bad"))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-badge")).ToHaveText("✗ bad"))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-comment")).ToHaveText("wrong: too vague"))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-at")).ToBeVisible())
		e.must(expect.Locator(detail.GetByTestId("run-feedback--1")).ToHaveAttribute("aria-pressed", "true"))
		e.snap("run-feedback-read")
		runID, err := detail.GetAttribute("data-run-id")
		e.must(err)

		// Neutral keeps the comment (it is in the field); Good with a new one; Clear removes both.
		e.must(detail.GetByTestId("run-feedback-0").Click())
		e.must(expect.Locator(detail.GetByTestId("run-feedback-given")).ToHaveText("Marked neutral"))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-0")).ToHaveAttribute("aria-pressed", "true"))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-comment")).ToHaveText("wrong: too vague"))
		if run, err := cl.GetRun(ctx, d.ID, runID); err != nil || run.Feedback == nil || run.Feedback.Score != 0 || run.Feedback.Comment != "wrong: too vague" {
			t.Fatalf("after Neutral the run keeps %+v (%v)", run.Feedback, err)
		}
		e.must(detail.GetByTestId("run-feedback-comment-input").Fill("clear enough on a second read"))
		e.must(detail.GetByTestId("run-feedback-1").Click())
		e.must(expect.Locator(detail.GetByTestId("run-feedback-given")).ToHaveText("Marked good"))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-comment")).ToHaveText("clear enough on a second read"))
		e.snap("run-feedback-given")
		e.must(detail.GetByTestId("run-feedback-clear").Click())
		e.must(expect.Locator(detail.GetByTestId("run-feedback-none")).ToHaveText("No feedback yet."))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-comment")).ToHaveCount(0))
		if run, err := cl.GetRun(ctx, d.ID, runID); err != nil || run.Feedback != nil {
			t.Fatalf("after Clear the run keeps %+v (%v)", run.Feedback, err)
		}
		e.must(e.page.Keyboard().Press("Escape"))

		// The failed run: no Good or Bad, and why.
		e.must(rows.Nth(2).GetByTestId("run-open").Click())
		e.must(expect.Locator(detail.GetByTestId("run-status")).ToHaveText("error 400"))
		e.must(expect.Locator(detail.GetByTestId("run-feedback-failed")).ToBeVisible())
		e.must(expect.Locator(detail.GetByTestId("run-feedback-1")).ToHaveCount(0))
		e.must(expect.Locator(detail.GetByTestId("run-feedback--1")).ToHaveCount(0))
		e.snap("run-feedback-failed")
	})
}
