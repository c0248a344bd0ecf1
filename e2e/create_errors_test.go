package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
)

// Journeys of the create form and of the errors a person meets, at a laptop's and a phone's width.
// Every one of them ends with a console free of errors and warnings (newEnv's cleanup checks it),
// the error journeys included.

// sdkEndpoint creates an endpoint through the SDK, as the CLI would, in the studio's project.
func (e *env) sdkEndpoint(slug string) *cloudapi.Deployment {
	e.t.Helper()
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	d, err := cl.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{
		Slug: slug, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
	})
	e.must(err)
	return d
}

// fillBaseModel fills the open create form with a slug and the first simulated base model.
func (e *env) fillBaseModel(slug string) {
	e.t.Helper()
	e.must(e.page.Locator("#create-slug").Fill(slug))
	e.must(e.testid("kind-base_model").Check())
	e.must(expect.Locator(e.page.Locator("#create-model option[value='sim-llama-3.1-8b-instruct']")).ToHaveCount(1))
	_, err := e.page.Locator("#create-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-llama-3.1-8b-instruct"}})
	e.must(err)
}

// The create form closes on success and the list reloads (docs/API.md, "Studio loopback routes", rule
// 4), with the new row marked and a way to its page.
func TestCreateClosesTheFormAndReloadsTheList(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		e.sdkEndpoint("older")
		e.open("#/endpoints")
		e.must(expect.Locator(e.row("older")).ToBeVisible())
		e.openCreate()
		// Made elsewhere (the CLI) while the form is open: only a list read again shows it.
		e.sdkEndpoint("meanwhile")
		e.fillBaseModel("fresh-one")
		e.must(e.testid("create-submit").Click())

		e.must(expect.Locator(e.testid("create-dialog")).Not().ToBeVisible())
		e.must(expect.Locator(e.testid("endpoint-list")).ToBeVisible())
		e.must(expect.Locator(e.row("meanwhile")).ToBeVisible())
		e.must(expect.Locator(e.testid("endpoint-row")).ToHaveCount(3))
		fresh := e.row("fresh-one")
		e.must(expect.Locator(fresh).ToHaveAttribute("data-new", "true"))
		e.must(expect.Locator(fresh.GetByTestId("new-badge")).ToBeVisible())
		e.must(expect.Locator(e.page.Locator(`tr[data-new="true"]`)).ToHaveCount(1))
		e.must(expect.Locator(e.testid("notice")).ToContainText("Created endpoint fresh-one."))
		// Focus is on the new row's link, which leads to its page.
		e.must(expect.Locator(fresh.GetByRole("link")).ToBeFocused())
		if h := e.hash(); h != "#/endpoints" && h != "" {
			t.Fatalf("hash %q after create, want the list's", h)
		}
		e.snap("created")

		// The notice's link opens the new endpoint.
		e.must(e.testid("notice-open").Click())
		e.must(expect.Locator(e.page.Locator("#main h1")).ToHaveText("fresh-one"))
		e.must(expect.Locator(e.testid("endpoint-detail").GetByTestId("target-summary")).ToHaveText("Base model: sim-llama-3.1-8b-instruct"))
	})
}

// A field's error goes when the field changes, and a refused form puts focus on its first field in
// error.
func TestFieldErrorsClearAndTakeFocus(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		job := e.registerJob()
		e.sdkEndpoint("taken")
		e.open("#/endpoints")
		e.openCreate()

		// Final adapter without a job: the error is under Job, and Job has the focus.
		e.must(e.page.Locator("#create-slug").Fill("adapter"))
		e.must(e.testid("kind-final_adapter").Check())
		e.must(e.testid("create-submit").Click())
		jobErr := e.testid("create-job-error")
		e.must(expect.Locator(jobErr).ToContainText("Choose the job"))
		e.must(expect.Locator(e.page.Locator("#create-job")).ToBeFocused())
		e.must(expect.Locator(e.page.Locator("#create-job")).ToHaveAttribute("aria-invalid", "true"))
		e.snap("job-error")
		// Switch to Checkpoint and pick the job: the error about the old choice is gone at once.
		e.must(e.testid("kind-checkpoint").Check())
		e.must(expect.Locator(jobErr).ToBeEmpty())
		e.must(expect.Locator(e.page.Locator("#create-job")).ToHaveAttribute("aria-invalid", "false"))
		e.pickJob(job.ID)

		// No step chosen: under Step, focus on Step; choosing one clears it.
		e.must(e.testid("create-submit").Click())
		stepErr := e.testid("create-step-error")
		e.must(expect.Locator(stepErr).ToContainText("step 100"))
		e.must(expect.Locator(e.page.Locator("#create-step")).ToBeFocused())
		_, err := e.page.Locator("#create-step").SelectOption(playwright.SelectOptionValues{Values: &[]string{"100"}})
		e.must(err)
		e.must(expect.Locator(stepErr).ToBeEmpty())

		// A taken slug (409 from the cloud): the message under Slug, focus on Slug; typing clears it.
		e.fillBaseModel("taken")
		e.must(e.testid("create-submit").Click())
		slugErr := e.testid("create-slug-error")
		e.must(expect.Locator(slugErr).ToHaveText(`Slug "taken" is already taken; choose another.`))
		e.must(expect.Locator(e.page.Locator("#create-slug")).ToBeFocused())
		e.snap("slug-taken")
		e.must(e.page.Keyboard().Type("-2"))
		e.must(expect.Locator(slugErr).ToBeEmpty())
		e.must(expect.Locator(e.page.Locator("#create-slug")).ToHaveAttribute("aria-invalid", "false"))
		e.must(expect.Locator(e.page.Locator("#create-slug")).ToHaveValue("taken-2"))
		e.must(expect.Locator(e.page.Locator("#create-model")).ToHaveValue("sim-llama-3.1-8b-instruct")) // reloaded with the form
		e.must(e.testid("create-submit").Click())
		e.must(expect.Locator(e.row("taken-2")).ToHaveAttribute("data-new", "true"))
	})
}

// The errors a person meets on the way, each shown where they look, in sentences, with nothing in
// the console: a reserved slug, the anonymous cap, an unknown endpoint, a cloud that stopped.
func TestExpectedErrorsAreShownWithoutConsoleErrors(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		// Anonymous identities keep at most 5 live endpoints (docs/API.md).
		for i := 1; i <= 5; i++ {
			e.sdkEndpoint(fmt.Sprintf("mine-%d", i))
		}
		e.open("#/endpoints")
		e.must(expect.Locator(e.testid("endpoint-row")).ToHaveCount(5))
		e.openCreate()

		// A reserved slug: the cloud's 400, under Slug, as a sentence.
		e.fillBaseModel("www")
		e.must(e.testid("create-submit").Click())
		e.must(expect.Locator(e.testid("create-slug-error")).ToHaveText(`Slug "www" is reserved; choose another name.`))
		// The form came back with the model still chosen, once its list loaded again (submitting before
		// that would send no model: a person cannot click that fast, a test can, under load).
		e.must(expect.Locator(e.page.Locator("#create-model")).ToHaveValue("sim-llama-3.1-8b-instruct"))

		// The sixth endpoint: the cap, above the form, as a sentence without Markdown.
		e.must(e.page.Locator("#create-slug").Fill("sixth"))
		e.must(e.testid("create-submit").Click())
		formErr := e.testid("form-error")
		e.must(expect.Locator(formErr).ToContainText("Anonymous users may keep at most 5 live endpoints"))
		e.must(expect.Locator(formErr).ToContainText("sign in with svc login"))
		e.must(expect.Locator(formErr).ToBeFocused())
		if txt := e.textOf("form-error"); strings.Contains(txt, "`") {
			t.Errorf("the form shows Markdown: %q", txt)
		}
		e.snap("anonymous-cap")
		e.must(e.page.Keyboard().Press("Escape"))
		e.must(expect.Locator(e.testid("create-dialog")).Not().ToBeVisible())

		// An unknown endpoint: its own view, a way back to the list, no Retry (it would not help).
		e.open("#/endpoints/no-such-id")
		e.must(expect.Locator(e.page.Locator("#main h1")).ToHaveText("Endpoint not found"))
		e.must(expect.Locator(e.testid("retry")).ToHaveCount(0))
		e.snap("unknown-endpoint")
		e.must(e.testid("error-view").GetByRole("link").Click())
		e.must(expect.Locator(e.testid("endpoint-row")).ToHaveCount(5))

		// The cloud stops: an action says so in the flash, and the view it started from stays.
		e.must(e.row("mine-1").GetByRole("link").Click())
		e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
		e.section("settings")
		e.must(e.closeAPI())
		e.must(e.testid("disable").Click())
		e.must(expect.Locator(e.page.Locator("#flash [role=alert]")).ToContainText("Is the server running?"))
		e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
		e.snap("cloud-down")
		e.page.WaitForTimeout(300) // late console lines, if any, arrive before the check
	})
}

// The list's error view: a title, Retry, no link to itself, no alert to dismiss into a blank page;
// Retry loads the list once the cloud is back.
func TestListErrorViewRetries(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		e.sdkEndpoint("survivor")
		e.must(e.closeAPI())
		e.open("#/endpoints")
		view := e.testid("error-view")
		e.must(expect.Locator(view.Locator("h1")).ToHaveText("The endpoints could not be loaded"))
		e.must(expect.Locator(view.GetByRole("alert")).ToContainText("Could not reach the cloud API at " + e.api.BaseURL))
		e.must(expect.Locator(e.page.Locator(`#main a[href="#/endpoints"]`)).ToHaveCount(0))
		e.must(expect.Locator(view.Locator("[data-dismiss]")).ToHaveCount(0))
		e.must(expect.Locator(e.testid("retry")).ToBeVisible())
		e.snap("list-error")

		// Still down: Retry shows the same view again (and nothing in the console).
		e.must(e.testid("retry").Click())
		e.must(expect.Locator(e.page.Locator("#main h1")).ToBeFocused())
		e.must(expect.Locator(e.testid("retry")).ToBeVisible())

		// Back up: Retry loads the list.
		e.restartAPI()
		e.must(e.testid("retry").Click())
		e.must(expect.Locator(e.row("survivor")).ToBeVisible())
		e.must(expect.Locator(e.page.Locator("#main h1")).ToBeFocused())
	})
}

// Disable asks first (declining changes nothing); a disabled endpoint's quick start says calls get
// 404 until it is enabled, which a call through the sample confirms.
func TestDisableAsksAndTheQuickStartWarns(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		d := e.sdkEndpoint("sleepy")
		e.open("#/endpoints/" + d.ID)
		e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
		e.must(expect.Locator(e.testid("qs-disabled")).ToHaveCount(0))

		e.section("settings")
		e.dialogMu.Lock()
		e.decline = 1
		e.dialogMu.Unlock()
		e.must(e.testid("disable").Click())
		e.must(expect.Locator(e.testid("disable")).ToBeEnabled())
		if last := e.lastDialog(); !strings.Contains(last, "Disable sleepy?") || !strings.Contains(last, "404") {
			t.Fatalf("Disable did not ask first: %q", last)
		}
		cl, err := e.local.ScopedClient(context.Background())
		e.must(err)
		if got, err := cl.GetDeployment(context.Background(), d.ID); err != nil || !got.Enabled {
			t.Fatalf("declining disabled it anyway: %+v %v", got, err)
		}

		e.must(e.testid("disable").Click())
		e.must(expect.Locator(e.testid("enable")).ToBeVisible())
		e.section("overview")
		warn := e.testid("qs-disabled")
		e.must(expect.Locator(warn).ToContainText("calls to it get 404 until you enable it"))
		e.snap("disabled")
		// The sample, pasted, gets that 404.
		out := runCurl(t, strings.ReplaceAll(e.textOf("qs-curl"), "<API_KEY>", "sk-none")+" --write-out ' HTTP %{http_code}'")
		if !strings.HasSuffix(strings.TrimSpace(out), "HTTP 404") {
			t.Fatalf("a call to the disabled endpoint: %s", out)
		}

		e.section("settings")
		e.must(e.testid("enable").Click())
		e.must(expect.Locator(e.testid("disable")).ToBeVisible())
		e.section("overview")
		e.must(expect.Locator(e.testid("qs-disabled")).ToHaveCount(0))
	})
}

// A failed run says why: a call beyond the rate limit (429) and a malformed one (400) show the model
// they were for, "error" with their status and error code, the reason, and the request as sent.
func TestFailedRunsSayWhy(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		d := e.sdkEndpoint("strict")
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		k, err := cl.IssueDeploymentKey(ctx, d.ID, "ci")
		e.must(err)
		one := 1
		_, err = cl.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Limits: cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(one)}})
		e.must(err)
		call := func(body string, want int) {
			req, err := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/strict/v1/chat/completions", strings.NewReader(body))
			e.must(err)
			req.Header.Set("Authorization", "Bearer "+k.Plaintext)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			e.must(err)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Fatalf("edge call %s: HTTP %d, want %d", body, resp.StatusCode, want)
			}
		}
		call(`{"messages": [{"role": "user", "content": "fits"}]}`, http.StatusOK)
		call(`{"model": "gpt-4o", "messages": [{"role": "user", "content": "one too many"}]}`, http.StatusTooManyRequests)
		_, err = cl.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Limits: cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.NoLimit()}})
		e.must(err)
		call(`{"messages": "not a list"}`, http.StatusBadRequest)
		e.api.Flush()

		e.open("#/endpoints/" + d.ID)
		rows := e.testid("run-row")
		e.must(expect.Locator(rows).ToHaveCount(3))
		for _, want := range []struct{ status, code, reason, request string }{
			{"error 429", "rate_limit_exceeded", "rate limit", "one too many"},
			{"error 400", "invalid_request", "Messages must be an array", "not a list"},
		} {
			row := rows.Filter(playwright.LocatorFilterOptions{Has: e.page.GetByText(want.status, playwright.PageGetByTextOptions{Exact: playwright.Bool(true)})})
			e.must(expect.Locator(row).ToHaveCount(1))
			e.must(expect.Locator(row.Locator(".run-model")).ToHaveText("sim-llama-3.1-8b-instruct"))
			e.must(row.GetByTestId("run-open").Click())
			detail := e.testid("run-detail")
			e.must(expect.Locator(detail.GetByTestId("run-status")).ToHaveText(want.status))
			e.must(expect.Locator(detail.GetByTestId("run-error-code")).ToHaveText(want.code))
			e.must(expect.Locator(detail.GetByTestId("run-reason")).ToContainText(want.reason))
			e.must(expect.Locator(detail.GetByTestId("run-request")).ToContainText(want.request))
			e.must(expect.Locator(detail).ToContainText("sim-llama-3.1-8b-instruct"))
			e.snap("run-" + want.code)
			e.must(e.page.Keyboard().Press("Escape"))
			e.must(expect.Locator(detail).Not().ToBeVisible())
		}
	})
}
