package e2e

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
)

// Token budgets in the studio, at 1280 and 390 px: an endpoint with a monthly budget and a key with a
// daily one; calls through the edge spend the key's until it answers 429 budget_exhausted; the keys
// table shows the key's budget used as a full bar marked spent under its limits (the other key: no
// bar), the Overview the
// endpoint's as a bar with its numbers, each inside its card.
func TestBudgetJourney(t *testing.T) { atWidths(t, budgetJourney) }

func budgetJourney(t *testing.T, e *env) {
	ctx := context.Background()
	cl, err := e.local.ScopedClient(ctx)
	e.must(err)
	d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
		Slug: "budgeted", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		Budget: &cloudapi.BudgetSet{Tokens: 1_000_000, Period: "month"},
	})
	e.must(err)
	key, err := cl.IssueDeploymentKeyWith(ctx, d.ID, cloudapi.IssueKeyRequest{Label: "metered", Budget: &cloudapi.BudgetSet{Tokens: 100, Period: "day"}})
	e.must(err)
	_, err = cl.IssueDeploymentKey(ctx, d.ID, "free")
	e.must(err)

	// Calls until the key's budget is spent: the last one answered crosses it, the next is refused.
	refused := false
	for i := 0; i < 20 && !refused; i++ {
		req, _ := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/budgeted/v1/chat/completions",
			strings.NewReader(`{"max_tokens":16,"messages":[{"role":"user","content":"spend a few tokens of the day"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		e.must(err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
		case http.StatusTooManyRequests:
			if !strings.Contains(string(body), "budget_exhausted") {
				t.Fatalf("429: %s", body)
			}
			refused = true
		default:
			t.Fatalf("edge call: HTTP %d %s", resp.StatusCode, body)
		}
	}
	if !refused {
		t.Fatal("the key's 100-token budget never ran out in 20 calls")
	}
	e.api.Flush()

	e.open("#/endpoints/" + d.ID + "/keys")
	e.must(expect.Locator(e.testid("tab-keys")).ToHaveAttribute("aria-current", "page"))
	row := e.testid("key-row").Filter(playwright.LocatorFilterOptions{HasText: "metered"})
	bar := row.GetByTestId("key-budget")
	e.must(expect.Locator(bar.GetByTestId("key-budget-text")).ToContainText("of 100 tokens today"))
	e.must(expect.Locator(bar.GetByTestId("key-budget-spent")).ToBeVisible())
	e.must(expect.Locator(bar.Locator("meter")).ToHaveAttribute("value", "100"))
	e.must(expect.Locator(bar.Locator("meter")).ToHaveAttribute("max", "100"))
	free := e.testid("key-row").Filter(playwright.LocatorFilterOptions{HasText: "free"})
	e.must(expect.Locator(free.GetByTestId("key-budget")).ToHaveCount(0))
	e.reachable(bar.Locator("meter"), e.testid("keys"), "the key's budget bar")
	e.snap("key-budget")

	e.section("overview")
	dep := e.testid("endpoint-budget")
	e.must(expect.Locator(dep.GetByTestId("endpoint-budget-text")).ToContainText("of 1,000,000 tokens this month"))
	e.must(expect.Locator(dep.GetByTestId("endpoint-budget-spent")).ToHaveCount(0))
	got, err := cl.GetDeployment(ctx, d.ID)
	e.must(err)
	if got.Budget == nil || got.Budget.Used < 100 {
		t.Fatalf("the endpoint's budget: %+v, want at least the key's 100 tokens used", got.Budget)
	}
	e.must(expect.Locator(dep.Locator("meter")).ToHaveAttribute("value", strconv.FormatInt(got.Budget.Used, 10)))
	e.snap("endpoint-budget")
}
