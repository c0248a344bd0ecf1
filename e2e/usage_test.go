package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
)

// Rate limits set on the detail page (a refused 0 first), a key's limits in its dialog, then calls
// through the edge show in the usage chart and in the keys table.
func TestLimitsAndUsageJourney(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cl, err := e.local.ScopedClient(ctx)
	e.must(err)
	d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
		Slug: "metered", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
	})
	e.must(err)
	key, err := cl.IssueDeploymentKey(ctx, d.ID, "ci")
	e.must(err)

	// The Usage section's own URL, loaded directly. Nothing called yet: the usage card says so.
	e.open("#/endpoints/" + d.ID + "/usage")
	e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
	e.must(expect.Locator(e.testid("usage-empty")).ToContainText("No calls in the last 24 hours"))
	e.section("keys")
	e.must(expect.Locator(e.testid("key-calls")).ToHaveText("0"))
	e.must(expect.Locator(e.testid("key-limits")).ToHaveText("Unlimited"))

	// The endpoint's limits are in Settings.
	e.section("settings")

	// A limit of 0 is refused, with the message under its field, in the form's words, and the value kept.
	e.must(e.testid("limit-rpm").Fill("0"))
	e.must(e.testid("limits-submit").Click())
	e.must(expect.Locator(e.testid("limit-rpm-error")).ToHaveText("Requests per minute must be a whole number from 1 to 1,000,000,000, or empty for unlimited."))
	e.must(expect.Locator(e.testid("limit-rpm")).ToHaveValue("0"))
	e.must(expect.Locator(e.testid("limit-rpm")).ToHaveAttribute("aria-invalid", "true"))
	e.shot("limits-refused")
	// Text that is no number is refused by the studio itself.
	e.must(e.testid("limit-tpm").Fill("lots"))
	e.must(e.testid("limits-submit").Click())
	e.must(expect.Locator(e.testid("limit-tpm-error")).ToContainText("whole number"))

	e.must(e.testid("limit-rpm").Fill("60"))
	e.must(e.testid("limit-tpm").Fill(""))
	e.must(e.testid("limits-submit").Click())
	e.must(expect.Locator(e.testid("limits-saved")).ToContainText("60 req/min"))
	e.must(expect.Locator(e.testid("limit-rpm-error")).ToBeHidden())
	got, err := cl.GetDeployment(ctx, d.ID)
	e.must(err)
	if got.Limits.RequestsPerMinute == nil || *got.Limits.RequestsPerMinute != 60 || got.Limits.TokensPerMinute != nil {
		t.Fatalf("limits upstream: %+v", got.Limits)
	}

	// The key's own limits, in its dialog: 0 is refused there too, then 5000 tokens a minute.
	e.section("keys")
	e.must(e.testid("key-limits-edit").Click())
	dialog := e.testid("key-limits-dialog")
	e.must(expect.Locator(dialog).ToBeVisible())
	tpm := dialog.Locator("input[name=tokensPerMinute]")
	e.must(tpm.Fill("0"))
	e.must(dialog.GetByTestId("key-limits-submit").Click())
	e.must(expect.Locator(dialog.Locator(".field-error").Filter(playwright.LocatorFilterOptions{HasText: "Tokens per minute must be a whole number from 1"})).ToBeVisible())
	e.must(expect.Locator(dialog).ToBeVisible())
	e.must(tpm.Fill("5000"))
	e.must(dialog.GetByTestId("key-limits-submit").Click())
	e.must(expect.Locator(e.testid("key-limits-dialog")).ToBeHidden())
	e.must(expect.Locator(e.testid("key-limits")).ToHaveText("5,000 tokens/min"))
	e.must(expect.Locator(e.testid("key-limits-edit")).ToBeFocused())
	keys, err := cl.ListDeploymentKeys(ctx, d.ID)
	e.must(err)
	if len(keys) != 1 || keys[0].Limits.TokensPerMinute == nil || *keys[0].Limits.TokensPerMinute != 5000 {
		t.Fatalf("key limits upstream: %+v", keys)
	}

	// Three calls through the edge's path form, then the recorder's batch is written.
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/metered/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"count me"}]}`))
		req.Header.Set("Authorization", "Bearer "+key.Plaintext)
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

	e.section("usage")
	e.must(e.testid("usage-refresh").Click())
	e.must(expect.Locator(e.testid("usage-requests")).ToHaveText("3"))
	e.must(expect.Locator(e.testid("usage-errors")).ToHaveText("0"))
	e.must(expect.Locator(e.testid("usage-bar")).ToHaveCount(1))
	e.must(expect.Locator(e.testid("usage-bar").Locator("title")).ToContainText("3 requests"))
	e.must(expect.Locator(e.testid("usage-chart-latency").Locator("rect")).Not().ToHaveCount(0))
	e.shot("usage-24h")

	// By day over 7 days: the same three calls, in today's bar.
	e.must(e.testid("usage-range-7d").Click())
	e.must(expect.Locator(e.testid("usage-range-7d")).ToHaveAttribute("aria-pressed", "true"))
	e.must(expect.Locator(e.testid("usage-requests")).ToHaveText("3"))
	e.must(expect.Locator(e.testid("usage-chart-requests").Locator("svg")).ToHaveAttribute("viewBox", "0 0 70 100"))
	e.must(e.page.GetByText("Show the numbers").Click())
	e.must(expect.Locator(e.testid("usage-row")).ToHaveCount(1))
	e.shot("usage-7d")

	// The keys table counts the key's calls of the last 24 hours.
	e.section("keys")
	e.must(expect.Locator(e.testid("key-calls")).ToHaveText("3"))

	// A call with a wrong key is refused with 401 and counted as an error of the endpoint.
	req, _ := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/metered/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"let me in"}]}`))
	req.Header.Set("Authorization", "Bearer sk-ep-wrong")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	e.must(err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong key: HTTP %d", resp.StatusCode)
	}
	e.api.Flush()
	e.section("usage")
	e.must(expect.Locator(e.testid("usage-requests")).ToHaveText("4"))
	e.must(expect.Locator(e.testid("usage-errors")).ToHaveText("1"))
	e.must(expect.Locator(e.testid("usage-refused")).ToHaveText("1 call refused, never run: 1 with a wrong or missing key (401)"))
	// The key's own count is unchanged: the refused call named no key the endpoint knows.
	e.section("keys")
	e.must(expect.Locator(e.testid("key-calls")).ToHaveText("3"))

	// Disabled, the endpoint answers the key's call 404, and counts it, as the key's, with that status.
	off := false
	_, err = cl.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off})
	e.must(err)
	req, _ = http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/metered/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"still there?"}]}`))
	req.Header.Set("Authorization", "Bearer "+key.Plaintext)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	e.must(err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a call to the disabled endpoint: HTTP %d", resp.StatusCode)
	}
	e.api.Flush()
	e.section("usage")
	e.must(expect.Locator(e.testid("usage-requests")).ToHaveText("5"))
	e.must(expect.Locator(e.testid("usage-errors")).ToHaveText("2"))
	e.must(expect.Locator(e.testid("usage-refused")).ToHaveText("2 calls refused, never run: 1 with a wrong or missing key (401), 1 to a disabled endpoint or a model it does not serve (404)"))
	e.shot("usage-refused")
	e.section("keys")
	e.must(expect.Locator(e.testid("key-calls")).ToHaveText("4"))
}
