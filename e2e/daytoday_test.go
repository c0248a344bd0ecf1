package e2e

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/handlers/studio"
)

// A studio-only user sees when an anonymous endpoint was made and when it is deleted, in the list and
// on the overview; the overview's SDK base URL, copied with its Copy button, works in the openai npm
// package, and a note says which URL SDKs take; at a laptop's and a phone's width.
func TestOverviewSaysExpiryAndGivesAnSDKURL(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "dated", AuthMode: cloudapi.AuthNone, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		if d.ExpiresAt == nil {
			t.Fatal("an anonymous identity's endpoint has no expiry")
		}
		created, expires := d.CreatedAt.UTC().Format("Jan 2, 15:04 UTC"), d.ExpiresAt.UTC().Format("Jan 2, 15:04 UTC")

		e.open("#/endpoints")
		dates := e.row("dated").GetByTestId("endpoint-dates")
		e.must(expect.Locator(dates).ToBeVisible())
		e.must(expect.Locator(dates).ToContainText("Created " + created))
		e.must(expect.Locator(dates).ToContainText("expires in 7 days"))
		e.snap("list-dates")

		e.open("#/endpoints/" + d.ID)
		e.must(expect.Locator(e.testid("created")).ToHaveText(created))
		e.must(expect.Locator(e.testid("expires")).ToContainText(expires + " (in 7 days)"))
		e.must(expect.Locator(e.testid("expires")).ToContainText("svc login keeps it"))
		// A week off is no emergency: no notice on the page.
		e.must(expect.Locator(e.testid("expiry-notice")).ToHaveCount(0))
		e.must(expect.Locator(e.testid("url-note")).ToContainText("SDK base URL"))
		e.must(expect.Locator(e.testid("sdk-url")).ToHaveText(e.api.BaseURL + "/e/dated/v1"))
		e.must(e.testid("copy-sdk-url").Click())
		base := e.clipboard()
		if base != e.api.BaseURL+"/e/dated/v1" {
			t.Fatalf("Copy put %q on the clipboard", base)
		}
		e.snap("overview-dates")
		// Pasted as the baseURL of OpenAI's SDK, it answers.
		out := runNodeScript(t, `import OpenAI from "openai";
const client = new OpenAI({ baseURL: process.argv[2], apiKey: "not-needed" });
const r = await client.chat.completions.create({ model: "sim-llama-3.1-8b-instruct", messages: [{ role: "user", content: "Hello!" }] });
console.log(r.choices[0].message.content);
`, base)
		if strings.TrimSpace(out) != "Hello!" {
			t.Fatalf("the SDK with the copied URL printed %q", out)
		}
	})
}

// runNodeScript runs an ES module with the repository's node_modules, with args, and returns its output.
func runNodeScript(t *testing.T, script string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(repoRoot, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "script.mjs"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{"script.mjs"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node script.mjs: %v\n%s", err, out)
	}
	return string(out)
}

// The canary form starts on Base model (the project has no training job); Start canary with a job kind
// and no job puts the error under the job picker with focus on it, in view; a share out of range goes
// under the share; a good form starts the canary; at a laptop's and a phone's width.
func TestCanaryFormErrorsUnderTheirFieldWithFocus(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "canaried", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		e.open("#/endpoints/" + d.ID + "/canary")
		e.must(expect.Locator(e.testid("canary-kind-base_model")).ToBeChecked())
		e.must(expect.Locator(e.testid("canary-model")).ToBeVisible())

		e.must(e.testid("canary-kind-final_adapter").Check())
		e.must(e.testid("canary-submit").Click())
		jobErr := e.testid("canary-job-error")
		e.must(expect.Locator(jobErr).ToContainText("Choose the job whose final adapter to serve"))
		e.must(expect.Locator(e.testid("canary-job")).ToBeFocused())
		e.must(expect.Locator(jobErr).ToBeInViewport())
		e.must(expect.Locator(e.testid("canary-kind-final_adapter")).ToBeChecked()) // the choice is kept
		e.snap("canary-job-error")

		e.must(e.testid("canary-kind-base_model").Check())
		e.must(expect.Locator(e.page.Locator("#canary-model option[value='sim-qwen2.5-7b-instruct']")).ToHaveCount(1))
		_, err = e.testid("canary-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-qwen2.5-7b-instruct"}})
		e.must(err)
		e.must(e.testid("canary-percent").Fill("100"))
		e.must(e.testid("canary-submit").Click())
		e.must(expect.Locator(e.testid("canary-percent-error")).ToContainText("99"))
		e.must(expect.Locator(e.testid("canary-percent")).ToBeFocused())
		e.must(expect.Locator(e.testid("canary-percent-error")).ToBeInViewport())
		e.snap("canary-percent-error")

		e.must(e.testid("canary-percent").Fill("20"))
		e.must(e.testid("canary-submit").Click())
		e.must(expect.Locator(e.testid("canary-summary")).ToHaveText("Canary: Base model: sim-qwen2.5-7b-instruct on 20% of sessions"))
		got, err := cl.GetDeployment(ctx, d.ID)
		e.must(err)
		if got.Canary == nil || got.Canary.Percent != 20 || got.Canary.Target.Model != "sim-qwen2.5-7b-instruct" {
			t.Fatalf("the canary upstream: %+v", got.Canary)
		}
	})
}

// Settings changes the target (confirmed, the picker as the create form's) and the run retention
// (confirmed; a bad number of days under its field); the overview then says both; at both widths.
func TestSettingsChangeTargetAndRetention(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "retarget", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		e.open("#/endpoints/" + d.ID + "/settings")
		e.must(expect.Locator(e.testid("target-current")).ToHaveText("Base model: sim-llama-3.1-8b-instruct"))
		e.must(e.testid("target-change").Click())
		e.must(expect.Locator(e.page.Locator("#target-model option[value='sim-qwen2.5-7b-instruct']")).ToHaveCount(1))
		// The pickers load without asking anything: only a submit is confirmed.
		if last := e.lastDialog(); last != "" {
			t.Fatalf("a confirmation before any change: %q", last)
		}
		_, err = e.testid("target-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-qwen2.5-7b-instruct"}})
		e.must(err)
		e.must(e.testid("target-submit").Click())
		e.must(expect.Locator(e.testid("target-saved")).ToContainText("sim-qwen2.5-7b-instruct"))
		e.must(expect.Locator(e.testid("target-current")).ToHaveText("Base model: sim-qwen2.5-7b-instruct"))
		if !strings.Contains(e.lastDialog(), "Serve another target at retarget?") {
			t.Fatalf("no confirmation before retargeting; last dialog %q", e.lastDialog())
		}
		e.snap("target-saved")

		// Retention: days 0 is refused under the field, 30 days saved, then unlimited.
		e.must(e.testid("retention-mode-days").Check())
		e.must(e.testid("retention-days").Fill("0"))
		e.must(e.testid("retention-submit").Click())
		e.must(expect.Locator(e.testid("retention-days-error")).ToContainText("whole number"))
		e.must(expect.Locator(e.testid("retention-days")).ToBeFocused())
		e.must(e.testid("retention-days").Fill("30"))
		e.must(e.testid("retention-submit").Click())
		e.must(expect.Locator(e.testid("retention-saved")).ToHaveText("Saved: Keep for 30 days."))
		e.snap("retention-saved")
		got, err := cl.GetDeployment(ctx, d.ID)
		e.must(err)
		if got.RunRetentionMode != cloudapi.RetentionDays || got.RunRetentionDays != 30 || got.Target.Model != "sim-qwen2.5-7b-instruct" {
			t.Fatalf("upstream: retention %s %d, target %+v", got.RunRetentionMode, got.RunRetentionDays, got.Target)
		}
		e.section("overview")
		e.must(expect.Locator(e.testid("retention")).ToContainText("Keep for 30 days"))
		e.must(expect.Locator(e.testid("target-summary")).ToHaveText("Base model: sim-qwen2.5-7b-instruct"))
		// A key-auth endpoint without a key: the quick start links to where New key is.
		e.must(e.testid("qs-new-key").Click())
		e.must(expect.Locator(e.testid("tab-keys")).ToHaveAttribute("aria-current", "page"))
		e.must(expect.Locator(e.testid("new-key")).ToBeVisible())
	})
}

// A tab loaded before the studio restarted (a new launch, a new CSRF token) says so when it is used,
// in view and with focus on a Reload button; one click reloads it on the same view, which then works;
// at a laptop's and a phone's width.
func TestStaleTabAfterRestartReloadsWithOneClick(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "restarted", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		e.open("#/endpoints/" + d.ID + "/settings")
		e.must(expect.Locator(e.testid("disable")).ToBeVisible())
		// The tab bar is one line at both widths (on a phone it scrolls sideways), its current tab in view.
		first, last := e.box(e.testid("tab-overview")), e.box(e.testid("tab-settings"))
		if first.Top != last.Top {
			t.Errorf("the tab bar wraps at %d px: Overview at y %v, Settings at y %v", e.width, first.Top, last.Top)
		}
		e.must(expect.Locator(e.testid("tab-settings")).ToBeInViewport())
		e.restartStudio()

		e.must(e.testid("disable").Click())
		stale := e.testid("stale-tab")
		e.must(expect.Locator(stale).ToBeVisible())
		e.must(expect.Locator(stale).ToContainText("The studio was restarted"))
		e.must(expect.Locator(stale).ToBeInViewport())
		e.must(expect.Locator(e.testid("stale-reload")).ToBeFocused())
		e.snap("stale-tab")
		if got, err := cl.GetDeployment(ctx, d.ID); err != nil || !got.Enabled {
			t.Fatalf("the stale tab changed the endpoint: %+v %v", got, err)
		}

		e.must(e.testid("stale-reload").Click())
		e.must(expect.Locator(e.testid("stale-tab")).ToHaveCount(0))
		e.must(expect.Locator(e.testid("tab-settings")).ToHaveAttribute("aria-current", "page"))
		e.must(e.testid("disable").Click())
		e.must(expect.Locator(e.testid("enable")).ToBeVisible())
		if got, err := cl.GetDeployment(ctx, d.ID); err != nil || got.Enabled {
			t.Fatalf("after Reload, Disable did not reach the cloud: %+v %v", got, err)
		}
	})
}

// restartStudio stops the studio and starts a new one (a new launch, a new CSRF token) on the same
// address, as `make run` started again does with SVC_STUDIO_ADDR pinned.
func (e *env) restartStudio() {
	e.t.Helper()
	// net/http's Shutdown waits up to 5 s for a connection that never sent a request (Chromium opens
	// such spare connections ahead of need) before it counts it idle: a bound of 5 s raced that wait.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	e.must(e.studio.Shutdown(ctx))
	st, err := studio.New(studio.Options{APIBaseURL: e.local.APIBaseURL, CredentialsPath: e.local.CredentialsPath,
		StatePath: e.local.StatePath, Logger: e.logger})
	e.must(err)
	l, err := net.Listen("tcp", strings.TrimSuffix(strings.TrimPrefix(e.url, "http://"), "/"))
	e.must(err)
	go func() { _ = st.Serve(l) }()
	e.studio = st
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = st.Shutdown(ctx)
	})
}

// Runs read as a log: filtered by status and by arm through the URL (a bookmark), by a control that
// keeps the URL in step, each shadow copy marked and linked to the caller's run it copies; the card
// says where refused calls are counted; at a laptop's and a phone's width.
func TestRunsFilteredThroughTheURL(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "logged", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		_, err = cl.SetCanary(ctx, d.ID, cloudapi.Canary{Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen2.5-7b-instruct"},
			Percent: 10, Mode: cloudapi.CanaryShadow})
		e.must(err)
		k, err := cl.IssueDeploymentKey(ctx, d.ID, "ci")
		e.must(err)
		call := func(key, body string) int {
			req, err := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/logged/v1/chat/completions", strings.NewReader(body))
			e.must(err)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			e.must(err)
			resp.Body.Close()
			return resp.StatusCode
		}
		if code := call("sk-ep-wrong", `{"messages": [{"role": "user", "content": "refused"}]}`); code != http.StatusUnauthorized {
			t.Fatalf("a wrong key: HTTP %d", code)
		}
		call(k.Plaintext, `{"messages": "not a list"}`)
		call(k.Plaintext, `{"messages": [{"role": "user", "content": "A question"}]}`)
		// A limit of one call a minute on the key: its second call is refused, 429, and is a run (the
		// first, another malformed one, is let through to its 400).
		_, err = cl.UpdateDeploymentKey(ctx, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Limits: cloudapi.LimitsUpdate{RequestsPerMinute: cloudapi.LimitTo(1)}})
		e.must(err)
		call(k.Plaintext, `{"messages": "not a list"}`)
		if code := call(k.Plaintext, `{"messages": [{"role": "user", "content": "too many"}]}`); code != http.StatusTooManyRequests {
			t.Fatalf("a call past the key's limit: HTTP %d", code)
		}
		_, err = cl.UpdateDeploymentKey(ctx, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Limits: cloudapi.ClearLimits()})
		e.must(err)
		// The answered call and its shadow copy, the failed call (a copy of it too, perhaps): wait for
		// the copy of the answered one.
		var shadow cloudapi.RunSummary
		for deadline := time.Now().Add(10 * time.Second); shadow.ID == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			e.api.Flush()
			page, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Arm: cloudapi.ArmShadow, Status: "ok"})
			e.must(err)
			if len(page.Runs) > 0 {
				shadow = page.Runs[0]
			}
		}
		if shadow.ID == "" {
			t.Fatal("no shadow copy was recorded")
		}
		all, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
		e.must(err)
		failed, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Status: "error"})
		e.must(err)
		copies, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Arm: cloudapi.ArmShadow})
		e.must(err)
		if len(failed.Runs) == 0 || len(failed.Runs) >= len(all.Runs) {
			t.Fatalf("%d runs, %d failed", len(all.Runs), len(failed.Runs))
		}

		// status=error in the URL: the failed runs only, the control showing it.
		e.open("#/endpoints/" + d.ID + "/runs?status=error")
		e.must(expect.Locator(e.testid("run-row")).ToHaveCount(len(failed.Runs)))
		e.must(expect.Locator(e.testid("runs-filter-status")).ToHaveValue("error"))
		for _, r := range failed.Runs {
			e.must(expect.Locator(e.page.Locator("[data-testid=run-row][data-run-id='" + r.ID + "']")).ToHaveCount(1))
		}
		e.must(expect.Locator(e.testid("runs-refused-note")).ToContainText("not runs"))
		e.snap("runs-failed")

		// status=refused in the URL: the call svc turned away with 429 alone.
		refused, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Status: "refused"})
		e.must(err)
		if len(refused.Runs) != 1 || refused.Runs[0].StatusCode != http.StatusTooManyRequests {
			t.Fatalf("refused runs: %+v", refused.Runs)
		}
		e.open("#/endpoints/" + d.ID + "/runs?status=refused")
		e.must(expect.Locator(e.testid("run-row")).ToHaveCount(1))
		e.must(expect.Locator(e.page.Locator("[data-testid=run-row][data-run-id='" + refused.Runs[0].ID + "']")).ToHaveCount(1))
		e.must(expect.Locator(e.testid("runs-filter-status")).ToHaveValue("refused"))
		e.must(expect.Locator(e.testid("run-status")).ToHaveText("error 429"))

		// arm=shadow in the URL: the copies, marked, the answered one opening onto its caller's run.
		e.open("#/endpoints/" + d.ID + "/runs?arm=shadow")
		e.must(expect.Locator(e.testid("run-row")).ToHaveCount(len(copies.Runs)))
		e.must(expect.Locator(e.testid("run-row").First().GetByTestId("run-arm-mark")).ToHaveText("shadow"))
		row := e.page.Locator("[data-testid=run-row][data-run-id='" + shadow.ID + "']")
		e.must(row.GetByTestId("run-open").Click())
		e.must(expect.Locator(e.testid("run-detail")).ToHaveAttribute("data-run-id", shadow.ID))
		e.must(e.testid("run-shadow-of").Click())
		e.must(expect.Locator(e.testid("run-detail")).ToHaveAttribute("data-run-id", shadow.ShadowOf))
		e.must(expect.Locator(e.testid("run-detail").GetByTestId("run-arm")).ToContainText("Primary"))
		e.must(e.page.Keyboard().Press("Escape"))

		// A control changes the list and the URL: any arm, answered only.
		_, err = e.testid("runs-filter-arm").SelectOption(playwright.SelectOptionValues{Values: &[]string{""}})
		e.must(err)
		_, err = e.testid("runs-filter-status").SelectOption(playwright.SelectOptionValues{Values: &[]string{"ok"}})
		e.must(err)
		e.must(expect.Page(e.page).ToHaveURL(e.url + "#/endpoints/" + d.ID + "/runs?status=ok"))
		e.must(expect.Locator(e.testid("run-row")).ToHaveCount(len(all.Runs) - len(failed.Runs)))
		// Each row previews what was asked: the call and its copy alike.
		e.must(expect.Locator(e.testid("run-preview")).ToHaveText([]string{"A question", "A question"}))
		e.snap("runs-ok")

		// The key table says when the key was issued and last used (by the calls above).
		e.section("keys")
		got, err := cl.ListDeploymentKeys(ctx, d.ID)
		e.must(err)
		if len(got) != 1 || got[0].LastUsedAt == nil {
			t.Fatalf("keys upstream: %+v", got)
		}
		e.must(expect.Locator(e.testid("key-last-used")).ToHaveText(got[0].LastUsedAt.UTC().Format("Jan 2, 15:04 UTC")))
		e.must(expect.Locator(e.testid("key-created")).ToHaveText("issued " + got[0].CreatedAt.UTC().Format("Jan 2, 15:04 UTC")))
		e.snap("keys-dates")

		// The overview's glance at the latest runs keeps each model name on at most two lines.
		e.section("overview")
		models := e.page.Locator("#runs [data-testid=run-row] td.run-model code")
		e.must(expect.Locator(models.First()).ToBeVisible())
		if n := e.lineCount(models.First()); n > 2 {
			t.Errorf("a model name wraps over %d lines in the overview's runs", n)
		}
		e.snap("overview-runs")
	})
}
