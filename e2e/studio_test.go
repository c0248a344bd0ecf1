package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
)

// A fresh launch: no credentials, no state. The list is empty and the state file stays unwritten
// (docs/API.md, "Studio loopback routes").
func TestFirstLaunchShowsEmptyList(t *testing.T) {
	e := newEnv(t)
	e.open("")
	e.must(expect.Locator(e.testid("empty-list")).ToBeVisible())
	e.must(expect.Locator(e.page.Locator("#identity")).ToContainText("Not signed in"))
	e.shot("empty-list")
	if _, err := os.Stat(e.local.StatePath); err == nil {
		t.Fatal("the first launch wrote the state file")
	}
	if _, err := os.Stat(e.local.CredentialsPath); err == nil {
		t.Fatal("the first launch minted credentials without need")
	}

	// The create form opens with the keyboard, and the pickers load then.
	e.must(e.testid("new-endpoint").Focus())
	e.must(e.page.Keyboard().Press("Enter"))
	e.must(expect.Locator(e.testid("create-dialog")).ToBeVisible())
	e.must(expect.Locator(e.page.Locator("#create-slug")).ToBeFocused())
	e.shot("create-form")
}

// Create one endpoint of each target kind through the form; a taken slug keeps the form open with
// the server's message.
func TestCreateEndpoints(t *testing.T) {
	e := newEnv(t)
	e.open("#/endpoints")
	e.must(expect.Locator(e.testid("empty-list")).ToBeVisible())

	// Base model first: this is the first call that needs a scope, so the state file appears.
	e.createEndpoint("base-one", "base_model", func() {
		e.must(expect.Locator(e.page.Locator("#create-model option[value='sim-llama-3.1-8b-instruct']")).ToHaveCount(1))
		_, err := e.page.Locator("#create-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-llama-3.1-8b-instruct"}})
		e.must(err)
	})
	e.must(expect.Locator(e.row("base-one").GetByTestId("target-summary")).ToHaveText("Base model: sim-llama-3.1-8b-instruct"))
	if _, err := os.Stat(e.local.StatePath); err != nil {
		t.Fatalf("no state file after the first create: %v", err)
	}

	// A completed training job in the same project, with its artifacts on disk.
	job := e.registerJob()

	e.createEndpoint("final-one", "final_adapter", func() { e.pickJob(job.ID) })
	e.must(expect.Locator(e.row("final-one").GetByTestId("target-summary")).ToHaveText("Final adapter (job " + job.ID[:8] + ")"))

	e.createEndpoint("ckpt-one", "checkpoint", func() {
		e.pickJob(job.ID)
		_, err := e.page.Locator("#create-step").SelectOption(playwright.SelectOptionValues{Values: &[]string{"100"}})
		e.must(err)
	})
	e.must(expect.Locator(e.row("ckpt-one").GetByTestId("target-summary")).ToHaveText("Checkpoint step 100 (job " + job.ID[:8] + ")"))
	e.must(expect.Locator(e.testid("endpoint-row")).ToHaveCount(3))
	e.shot("list-three")

	// 409: the same slug again. The form stays open, the message is the server's, next to the slug.
	e.openCreate()
	e.must(e.page.Locator("#create-slug").Fill("base-one"))
	e.must(e.testid("kind-base_model").Check())
	e.must(expect.Locator(e.page.Locator("#create-model option[value='sim-llama-3.1-8b-instruct']")).ToHaveCount(1))
	_, err := e.page.Locator("#create-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-llama-3.1-8b-instruct"}})
	e.must(err)
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.testid("create-slug-error")).ToContainText("base-one"))
	e.must(expect.Locator(e.testid("create-dialog")).ToBeVisible())
	e.must(expect.Locator(e.page.Locator("#create-slug")).ToHaveValue("base-one"))
	// The picker reloads with the choice kept.
	e.must(expect.Locator(e.page.Locator("#create-model")).ToHaveValue("sim-llama-3.1-8b-instruct"))
	e.shot("create-409")

	// A field error from the form itself: a checkpoint without a step.
	e.must(e.page.Locator("#create-slug").Fill("no-step"))
	e.must(e.testid("kind-checkpoint").Check())
	e.pickJob(job.ID)
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.testid("create-step-error")).ToContainText("checkpoints: step 100."))
	e.must(e.page.Keyboard().Press("Escape"))
	e.must(expect.Locator(e.testid("create-dialog")).Not().ToBeVisible())
	e.must(expect.Locator(e.testid("endpoint-row")).ToHaveCount(3))
}

// The detail page at 1280x800: deep link, enable and disable, auth mode, keys, the quick-start card
// (its cURL and JavaScript samples copied and run), the playground, delete.
func TestEndpointDetailJourney(t *testing.T) {
	e := newEnv(t)
	e.must(e.page.SetViewportSize(1280, 800))
	// The endpoint exists before the browser arrives, created through the SDK as the CLI would.
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	d, err := cl.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{
		Slug: "journey", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
	})
	e.must(err)

	// Deep link straight to the detail.
	e.open("#/endpoints/" + d.ID)
	e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
	e.must(expect.Locator(e.page.Locator("h1")).ToHaveText("journey"))
	e.must(expect.Locator(e.testid("endpoint-url")).ToHaveText(d.URL))
	e.must(expect.Locator(e.testid("retention")).ToContainText("Keep for 7 days"))
	e.must(expect.Locator(e.testid("runs-empty")).ToContainText("(retention: 7 days)"))
	e.shot("detail")

	// Disable from the keyboard in Settings (focus stays on the toggle), then enable with a click.
	e.section("settings")
	e.must(e.testid("disable").Focus())
	e.must(e.page.Keyboard().Press("Enter"))
	e.must(expect.Locator(e.testid("endpoint-detail").GetByTestId("enabled").First()).ToHaveText("Disabled"))
	e.must(expect.Locator(e.testid("enable")).ToBeFocused())
	e.must(e.testid("enable").Click())
	e.must(expect.Locator(e.testid("endpoint-detail").GetByTestId("enabled").First()).ToHaveText("Enabled"))
	got, err := cl.GetDeployment(context.Background(), d.ID)
	e.must(err)
	if !got.Enabled {
		t.Fatal("not enabled upstream")
	}

	// Switch to none: a confirmation warns, the page warns, the cURL sample drops the header.
	e.must(e.testid("auth-none").Click())
	e.must(expect.Locator(e.testid("auth-warning")).ToBeVisible())
	if last := e.lastDialog(); !strings.Contains(last, "Anyone who knows the URL") {
		t.Fatalf("no warning before switching to none: %q", last)
	}
	e.section("overview")
	e.must(expect.Locator(e.testid("qs-curl")).Not().ToContainText("Authorization"))
	e.shot("detail-auth-none")
	e.section("settings")
	e.must(e.testid("auth-fixed").Click())
	e.must(expect.Locator(e.testid("auth-warning")).ToHaveCount(0))
	e.section("overview")
	e.must(expect.Locator(e.testid("qs-curl")).ToContainText("Authorization: Bearer <API_KEY>"))

	// Issue a key: the label is prompted; the plaintext is shown once.
	e.section("keys")
	e.must(e.testid("new-key").Click())
	e.must(expect.Locator(e.testid("key-dialog")).ToBeVisible())
	e.must(e.testid("key-label-input").Fill(`<script>alert("x")</script> laptop`))
	e.must(e.testid("key-submit").Click())
	e.must(expect.Locator(e.testid("key-plaintext")).ToBeVisible())
	e.must(expect.Locator(e.testid("key-issued")).ToContainText("cannot be shown again"))
	plaintext, err := e.testid("key-plaintext").TextContent()
	e.must(err)
	if !strings.HasPrefix(plaintext, "sk-") || len(plaintext) < 32 {
		t.Fatalf("plaintext %q", plaintext)
	}
	e.copyBy("copy-key")
	if clip := e.clipboard(); clip != plaintext {
		t.Fatalf("clipboard %q, want the key", clip)
	}
	e.shot("key-issued")
	e.must(e.testid("key-done").Click())
	e.must(expect.Locator(e.testid("key-dialog")).Not().ToBeVisible())
	// Gone from the page; the table shows the hostile label as text.
	e.must(expect.Locator(e.page.GetByText(plaintext)).ToHaveCount(0))
	if html, _ := e.page.Content(); strings.Contains(html, plaintext) {
		t.Fatal("the plaintext stayed in the page after the dialog closed")
	}
	e.must(expect.Locator(e.testid("key-label")).ToHaveText(`<script>alert("x")</script> laptop`))

	// Copy the cURL sample from the card, fill in the key, run it: a completion from the edge.
	e.section("overview")
	e.must(e.testid("qs-copy").Click())
	sample := e.clipboard()
	if !strings.Contains(sample, e.api.BaseURL+"/e/journey/v1/chat/completions") {
		t.Fatalf("the cURL sample does not use the path form:\n%s", sample)
	}
	out := runCurl(t, strings.ReplaceAll(sample, "<API_KEY>", plaintext))
	if !strings.Contains(out, `"chat.completion"`) || !strings.Contains(out, `"choices"`) {
		t.Fatalf("curl did not get a completion:\n%s", out)
	}

	// The call shows in the "Recent runs" card after a Refresh. The edge records runs in batches,
	// so write the batch now rather than wait for it.
	e.api.Flush()
	e.must(e.testid("runs-refresh").Click())
	e.must(expect.Locator(e.testid("run-row")).ToHaveCount(1))
	e.must(expect.Locator(e.testid("run-row").GetByTestId("run-status")).ToHaveText("ok"))
	e.must(expect.Locator(e.testid("run-row")).ToContainText("sim-llama-3.1-8b-instruct"))
	// The run names its key by the label the key table shows.
	e.must(expect.Locator(e.testid("run-row").GetByTestId("run-key")).ToHaveText(`<script>alert("x")</script> laptop`))
	e.shot("runs")

	// The other languages: SDK base URL ending in /v1 with an apiKey setting.
	_, err = e.testid("qs-lang").SelectOption(playwright.SelectOptionValues{Values: &[]string{"javascript"}})
	e.must(err)
	e.must(expect.Locator(e.testid("qs-javascript")).ToBeVisible())
	e.must(expect.Locator(e.testid("qs-javascript")).ToContainText(`baseURL: "` + e.api.BaseURL + `/e/journey/v1"`))
	e.must(expect.Locator(e.testid("qs-javascript")).ToContainText(`apiKey: "<API_KEY>"`))
	// Copy the JavaScript sample with the card's Copy button, paste it into the file it names, fill in
	// the key, and run it with the real openai npm package: it prints the simulator's echo of "Hello!".
	e.copyBy("qs-copy")
	js := e.clipboard()
	if js != e.textOf("qs-javascript") {
		t.Fatalf("Copy put another text on the clipboard than the JavaScript sample:\n%s", js)
	}
	if out := runNode(t, strings.ReplaceAll(js, "<API_KEY>", plaintext)); strings.TrimSpace(out) != "Hello!" {
		t.Fatalf("the JavaScript sample did not print the completion:\n%s", out)
	}
	_, err = e.testid("qs-lang").SelectOption(playwright.SelectOptionValues{Values: &[]string{"curl"}})
	e.must(err)

	// The playground (in Settings), with the pasted key.
	e.section("settings")
	e.must(e.testid("pg-key").Fill(plaintext))
	e.must(e.testid("pg-message").Fill("Hello from the studio"))
	e.must(e.testid("pg-send").Click())
	e.must(expect.Locator(e.testid("chat-reply")).ToBeVisible())
	e.shot("playground")

	// Hide the quick-start card: it stays hidden after a reload.
	e.section("overview")
	e.must(e.testid("qs-hide").Click())
	e.must(expect.Locator(e.testid("quickstart")).Not().ToBeVisible())
	_, err = e.page.Reload()
	e.must(err)
	e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
	e.must(expect.Locator(e.testid("quickstart")).Not().ToBeVisible())
	e.must(e.testid("qs-show").Click())
	e.must(expect.Locator(e.testid("quickstart")).ToBeVisible())

	// Revoke the key (confirmed), and the same cURL call is refused.
	e.section("keys")
	e.must(e.testid("revoke").Click())
	e.must(expect.Locator(e.testid("key-revoked")).ToBeVisible())
	keys, err := cl.ListDeploymentKeys(context.Background(), d.ID)
	e.must(err)
	if len(keys) != 1 || keys[0].Enabled {
		t.Fatalf("keys upstream: %+v", keys)
	}
	e.shot("key-revoked")

	// Delete with confirmation: back on the list, which is empty again.
	e.section("settings")
	e.must(e.testid("delete").Click())
	e.must(expect.Locator(e.testid("empty-list")).ToBeVisible())
	if last := e.lastDialog(); !strings.Contains(last, "Delete endpoint journey?") {
		t.Fatalf("delete was not confirmed: %q", last)
	}
	if h := e.hash(); h != "#/endpoints" {
		t.Fatalf("hash %q after delete", h)
	}
}

// At 390 px every control is still reachable, and the keyboard reaches the create dialog.
func TestNarrowScreenAndKeyboard(t *testing.T) {
	e := newEnv(t)
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	d, err := cl.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{
		Slug: "phone", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-qwen2.5-7b-instruct"}, AuthMode: cloudapi.AuthNone,
	})
	e.must(err)
	e.must(e.page.SetViewportSize(390, 844))
	e.open("#/endpoints")
	e.must(expect.Locator(e.row("phone")).ToBeVisible())
	// Tab to the slug link and follow it with Enter.
	link := e.row("phone").GetByRole("link")
	for i := 0; i < 10; i++ {
		e.must(e.page.Keyboard().Press("Tab"))
		if focused, _ := link.Evaluate("el => el === document.activeElement", nil); focused == true {
			break
		}
	}
	e.must(expect.Locator(link).ToBeFocused())
	e.must(e.page.Keyboard().Press("Enter"))
	e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
	if e.hash() != "#/endpoints/"+d.ID {
		t.Fatalf("hash %q", e.hash())
	}
	// A public endpoint's samples: no header; SDKs get a non-empty placeholder.
	e.must(expect.Locator(e.testid("qs-curl")).Not().ToContainText("Authorization"))
	e.must(expect.Locator(e.testid("qs-python")).ToContainText(`api_key="not-needed"`))
	out := runCurl(t, e.textOf("qs-curl"))
	if !strings.Contains(out, `"choices"`) {
		t.Fatalf("curl on a public endpoint:\n%s", out)
	}
}

// ---- helpers ----

func (e *env) openCreate() {
	e.t.Helper()
	e.must(e.testid("new-endpoint").Click())
	e.must(expect.Locator(e.testid("create-dialog")).ToBeVisible())
}

// createEndpoint fills the form with a slug, a target kind (fill picks the target) and the default
// auth mode, submits, and waits for the dialog to close and the list to show the new row, marked.
func (e *env) createEndpoint(slug, kind string, fill func()) {
	e.t.Helper()
	e.openCreate()
	e.must(e.page.Locator("#create-slug").Fill(slug))
	e.must(e.testid("kind-" + kind).Check())
	fill()
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.testid("create-dialog")).Not().ToBeVisible())
	e.must(expect.Locator(e.row(slug)).ToHaveAttribute("data-new", "true"))
}

func (e *env) pickJob(id string) {
	e.t.Helper()
	e.must(expect.Locator(e.page.Locator("#create-job option[value='" + id + "']")).ToHaveCount(1))
	_, err := e.page.Locator("#create-job").SelectOption(playwright.SelectOptionValues{Values: &[]string{id}})
	e.must(err)
}

func (e *env) row(slug string) playwright.Locator {
	return e.page.Locator(`[data-testid="endpoint-row"][data-slug="` + slug + `"]`)
}

func (e *env) hash() string {
	h, err := e.page.Evaluate("() => location.hash")
	e.must(err)
	s, _ := h.(string)
	return s
}

func (e *env) textOf(testid string) string {
	e.t.Helper()
	s, err := e.testid(testid).TextContent()
	e.must(err)
	return s
}

// copyBy clicks a Copy button and waits for its feedback: the status line screen readers hear ("Copied
// to the clipboard."), which stays until the next announcement, where the button's own "Copied" shows
// for 1.5 s only (a loaded machine's polls can miss it).
func (e *env) copyBy(button string) {
	e.t.Helper()
	_, err := e.page.Evaluate(`() => { document.getElementById("sr-status").textContent = "" }`)
	e.must(err)
	e.must(e.testid(button).Click())
	e.must(expect.Locator(e.page.Locator("#sr-status")).ToHaveText("Copied to the clipboard."))
}

func (e *env) clipboard() string {
	e.t.Helper()
	v, err := e.page.Evaluate("() => navigator.clipboard.readText()")
	e.must(err)
	s, _ := v.(string)
	return s
}

// registerJob records a completed training job with a final adapter and a checkpoint at step 100,
// whose artifacts exist in the server's artifacts folder, in the studio's project.
func (e *env) registerJob() *cloudapi.Job {
	e.t.Helper()
	dir := e.api.ArtifactsDir
	final := filepath.Join(dir, "final-adapter")
	ckpt := filepath.Join(dir, "checkpoint-100")
	for _, p := range []string{final, ckpt} {
		e.must(os.WriteFile(p, []byte("adapter weights"), 0o644))
	}
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	job, err := cl.CreateJob(context.Background(), cloudapi.CreateJobRequest{
		BaseModel: "sim-llama-3.1-8b-instruct", Status: cloudapi.JobCompleted,
		Checkpoints: []cloudapi.Checkpoint{{Step: 100, Artifact: "file://" + ckpt}}, FinalAdapter: &final,
	})
	e.must(err)
	return job
}

// runCurl runs a copied sample as a user would paste it into a shell.
func runCurl(t *testing.T, sample string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "sh", "-c", sample+" --silent --show-error --max-time 20").CombinedOutput()
	if err != nil {
		t.Fatalf("sh -c <sample>: %v\n%s\nsample:\n%s", err, out, sample)
	}
	return string(out)
}

// runNode runs a pasted JavaScript sample as a user would: saved under the file name its comment
// names (hello.mjs) in a folder of its own whose node_modules is the repository's, where the openai
// package its install line names is installed (the npm install the sample asks for, done already).
func runNode(t *testing.T, sample string) string {
	t.Helper()
	if !strings.Contains(sample, "npm install openai") {
		t.Fatalf("the sample does not say its install line:\n%s", sample)
	}
	m := regexp.MustCompile(`Save as (\S+\.mjs) .*run: node (\S+)`).FindStringSubmatch(sample)
	if m == nil || m[1] != m[2] {
		t.Fatalf("the sample does not say which file to save it as and run:\n%s", sample)
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(repoRoot, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, m[1]), []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", m[1])
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s\nsample:\n%s", m[1], err, out, sample)
	}
	return string(out)
}

// Failures are visible: a deep link to an unknown endpoint, and an action while the cloud is down.
func TestErrorStates(t *testing.T) {
	e := newEnv(t)
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	d, err := cl.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{
		Slug: "fragile", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
	})
	e.must(err)

	e.open("#/endpoints/no-such-id")
	e.must(expect.Locator(e.page.Locator("#main h1")).ToHaveText("Endpoint not found"))
	e.must(expect.Locator(e.page.Locator("#main [role=alert]")).ToContainText("may have been deleted"))
	e.shot("unknown-endpoint")
	e.must(e.testid("error-view").GetByRole("link").Click())
	e.must(expect.Locator(e.row("fragile")).ToBeVisible())

	e.open("#/endpoints/" + d.ID + "/settings")
	e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
	e.must(e.closeAPI())
	e.must(e.testid("disable").Click())
	// The view stays; the flash says what happened.
	e.must(expect.Locator(e.page.Locator("#flash [role=alert]")).ToContainText("Could not reach the cloud API"))
	e.must(expect.Locator(e.testid("endpoint-detail")).ToBeVisible())
	e.shot("cloud-down")
	// The alert can be dismissed from the keyboard.
	e.must(e.page.Locator("#flash [data-dismiss]").Focus())
	e.must(e.page.Keyboard().Press("Enter"))
	e.must(expect.Locator(e.page.Locator("#flash [role=alert]")).ToHaveCount(0))
}
