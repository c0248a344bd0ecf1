package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
)

// Runs say the route each call came in by (a Surface column, the run's detail) and filter by it
// through the URL and through a control that keeps the URL in step; at a laptop's and a phone's width.
func TestRunsFilteredBySurface(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "routes", AuthMode: cloudapi.AuthNone, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		for _, c := range []struct{ path, body string }{
			{"/v1/chat/completions", `{"messages":[{"role":"user","content":"by chat"}]}`},
			{"/v1/messages", `{"max_tokens":16,"messages":[{"role":"user","content":"by messages"}]}`},
			{"/v1/messages", `{"max_tokens":16,"messages":[{"role":"user","content":"by messages again"}]}`},
			{"/v1/responses", `{"input":"by responses"}`},
		} {
			req, err := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/routes"+c.path, strings.NewReader(c.body))
			e.must(err)
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			e.must(err)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: HTTP %d", c.path, resp.StatusCode)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			e.api.Flush()
			page, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
			e.must(err)
			if len(page.Runs) == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d runs recorded, want 4", len(page.Runs))
			}
		}

		// surface=messages in the URL: the two Messages calls, the control showing it.
		e.open("#/endpoints/" + d.ID + "/runs?surface=messages")
		e.must(expect.Locator(e.testid("runs-filter-surface")).ToHaveValue("messages"))
		e.must(expect.Locator(e.testid("run-surface")).ToHaveText([]string{"messages", "messages"}))
		e.must(expect.Locator(e.testid("run-preview")).ToHaveText([]string{"by messages again", "by messages"}))
		e.snap("runs-messages")

		// The control: Responses only, the URL in step; the run's detail names its route.
		_, err = e.testid("runs-filter-surface").SelectOption(playwright.SelectOptionValues{Values: &[]string{"responses"}})
		e.must(err)
		e.must(expect.Page(e.page).ToHaveURL(e.url + "#/endpoints/" + d.ID + "/runs?surface=responses"))
		e.must(expect.Locator(e.testid("run-surface")).ToHaveText([]string{"responses"}))
		e.must(e.testid("run-open").Click())
		e.must(expect.Locator(e.testid("run-surface-line")).ToContainText("POST /v1/responses"))
		e.must(e.page.Keyboard().Press("Escape"))

		// Any surface: each run's route in its column, newest first.
		_, err = e.testid("runs-filter-surface").SelectOption(playwright.SelectOptionValues{Values: &[]string{""}})
		e.must(err)
		e.must(expect.Page(e.page).ToHaveURL(e.url + "#/endpoints/" + d.ID + "/runs"))
		e.must(expect.Locator(e.testid("run-surface")).ToHaveText([]string{"responses", "messages", "messages", "chat"}))
		e.snap("runs-surfaces")
	})
}
