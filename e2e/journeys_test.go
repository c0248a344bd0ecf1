package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/handlers/studio"
)

// The widths the studio is checked at: a laptop, a small laptop or tablet, a phone.
var widths = []int{1280, 1024, 390}

// box is an element's place in the viewport.
type box struct{ Left, Right, Top, Bottom float64 }

func (e *env) box(l playwright.Locator) box {
	e.t.Helper()
	v, err := l.Evaluate(`el => { const r = el.getBoundingClientRect(); return {Left: r.left, Right: r.right, Top: r.top, Bottom: r.bottom}; }`, nil)
	e.must(err)
	m := v.(map[string]any)
	f := func(k string) float64 {
		switch n := m[k].(type) {
		case float64:
			return n
		case int:
			return float64(n)
		}
		return 0
	}
	return box{f("Left"), f("Right"), f("Top"), f("Bottom")}
}

// reachable fails unless el can be seen and clicked where it is: inside the viewport's width, inside
// container, and the element the browser finds at its centre. It scrolls the page vertically only, the
// way a user does, never the containers (a focus() or scrollIntoView would scroll a clipped container
// and hide the problem).
func (e *env) reachable(el, container playwright.Locator, what string) box {
	e.t.Helper()
	_, err := el.Evaluate(`el => { const r = el.getBoundingClientRect(); window.scrollBy(0, r.top - window.innerHeight / 2); }`, nil)
	e.must(err)
	b, c := e.box(el), e.box(container)
	vw, err := e.page.Evaluate(`() => document.documentElement.clientWidth`)
	e.must(err)
	width := float64(vw.(int))
	if b.Left < c.Left-0.5 || b.Right > c.Right+0.5 || b.Left < 0 || b.Right > width {
		e.t.Fatalf("%s sits at x %.0f–%.0f, outside its card (%.0f–%.0f) or the %v px window", what, b.Left, b.Right, c.Left, c.Right, width)
	}
	hit, err := el.Evaluate(`el => { const r = el.getBoundingClientRect(); const at = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2); return at !== null && (at === el || el.contains(at)); }`, nil)
	e.must(err)
	if hit != true {
		e.t.Fatalf("%s is covered or clipped: a click at its centre lands elsewhere", what)
	}
	return b
}

// Point 1: a key whose label is 80 characters without a space can be revoked with the mouse at
// every width, and with the keyboard.
func TestRevokeWithLongLabelAtEveryWidth(t *testing.T) {
	e := newEnv(t)
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	d, err := cl.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{
		Slug: "long-labels", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
	})
	e.must(err)
	// The keys section's own URL, loaded directly, shows that section.
	e.open("#/endpoints/" + d.ID + "/keys")
	e.must(expect.Locator(e.testid("tab-keys")).ToHaveAttribute("aria-current", "page"))

	// Issue one key per width through the dialog, with the longest label allowed and no space in it.
	for i := range widths {
		label := strings.Repeat(string(rune('a'+i)), 80)
		e.must(e.testid("new-key").Click())
		e.must(e.testid("key-label-input").Fill(label))
		e.must(e.testid("key-submit").Click())
		e.must(expect.Locator(e.testid("key-plaintext")).ToBeVisible())
		e.must(e.testid("key-done").Click())
	}
	e.must(expect.Locator(e.testid("revoke")).ToHaveCount(len(widths)))

	for i, w := range widths {
		e.must(e.page.SetViewportSize(w, 900))
		keys := e.testid("keys")
		for _, th := range []string{"Prefix", "Status"} {
			if w > 640 { // at phone width the table is stacked cards and the header is for screen readers
				e.reachable(keys.Locator("th", playwright.LocatorLocatorOptions{HasText: th}), keys, th+" header at "+strconv.Itoa(w))
			}
		}
		row := keys.Locator(`[data-testid="key-row"]`).Nth(i)
		btn := row.GetByTestId("revoke")
		b := e.reachable(btn, keys, "the Revoke button at "+strconv.Itoa(w))
		e.must(e.page.Mouse().Click((b.Left+b.Right)/2, (b.Top+b.Bottom)/2))
		e.must(expect.Locator(row.GetByTestId("key-revoked")).ToBeVisible())
		e.shotAt("revoked", w)
	}

	// The keyboard reaches Revoke too.
	e.must(e.page.SetViewportSize(1280, 900))
	e.must(e.testid("new-key").Click())
	e.must(e.testid("key-label-input").Fill(strings.Repeat("k", 80)))
	e.must(e.page.Keyboard().Press("Enter"))
	e.must(expect.Locator(e.testid("key-plaintext")).ToBeVisible())
	e.must(e.testid("key-done").Click())
	// The 80-character label is one line cut with an ellipsis, whole on hover (title).
	long := e.page.Locator(`[data-testid="key-label"][title="` + strings.Repeat("k", 80) + `"]`)
	e.must(expect.Locator(long).ToBeVisible())
	if box, err := long.Locator(".truncate").BoundingBox(); err != nil || box.Height > 30 {
		t.Fatalf("the long label is not one line: %+v %v", box, err)
	}
	btn := e.testid("revoke")
	e.must(expect.Locator(btn).ToHaveCount(1))
	for i := 0; i < 40; i++ {
		if focused, _ := btn.Evaluate("el => el === document.activeElement", nil); focused == true {
			break
		}
		e.must(e.page.Keyboard().Press("Tab"))
	}
	e.must(expect.Locator(btn).ToBeFocused())
	e.must(e.page.Keyboard().Press("Enter"))
	e.must(expect.Locator(e.testid("key-revoked")).ToHaveCount(len(widths) + 1))
}

// Point 11: the list gives its width to what needs it: a URL and a target summary stay on one line
// at laptop widths, a 50-character slug wraps instead of pushing the other columns, and nothing is
// pushed out at any width.
func TestListColumnsAtEveryWidth(t *testing.T) {
	e := newEnv(t)
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	for _, slug := range []string{"my-first-model", strings.Repeat("long-slug-", 5)[:49] + "z"} {
		_, err := cl.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{
			Slug: slug, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
	}
	e.open("#/endpoints")
	e.must(expect.Locator(e.testid("endpoint-row")).ToHaveCount(2))
	for _, w := range widths {
		e.must(e.page.SetViewportSize(w, 900))
		list := e.testid("endpoint-list")
		for _, row := range []playwright.Locator{e.row("my-first-model"), e.row(strings.Repeat("long-slug-", 5)[:49] + "z")} {
			e.reachable(row.GetByTestId("enabled"), list, "the Status badge at "+strconv.Itoa(w))
		}
		if w >= 1024 {
			row := e.row("my-first-model")
			for _, what := range []string{"target-summary", "endpoint-url"} {
				if n := e.lineCount(row.GetByTestId(what)); n != 1 {
					e.t.Errorf("at %d px the %s of my-first-model takes %d lines, want 1", w, what, n)
				}
			}
		}
		e.shotAt("list", w)
	}
}

// lineCount is the number of lines the text of el is laid out on.
func (e *env) lineCount(el playwright.Locator) int {
	e.t.Helper()
	v, err := el.Evaluate(`el => { const r = document.createRange(); r.selectNodeContents(el);
		const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))); return tops.size; }`, nil)
	e.must(err)
	return v.(int)
}

// Point 2: the first-run form starts on Base model, which needs nothing but the catalog; asking for a
// job when there is none says how to get one and what to choose instead.
func TestFirstRunCreateForm(t *testing.T) {
	e := newEnv(t)
	e.open("")
	e.must(expect.Locator(e.testid("empty-list")).ToBeVisible())
	e.openCreate()
	e.must(expect.Locator(e.testid("kind-base_model")).ToBeChecked())
	e.must(expect.Locator(e.page.Locator("#create-model")).ToBeVisible())
	e.must(expect.Locator(e.page.Locator("#create-model option[value='sim-llama-3.1-8b-instruct']")).ToHaveCount(1))

	e.must(e.testid("kind-final_adapter").Check())
	e.must(expect.Locator(e.page.Locator("#create-job")).ToContainText("No training jobs"))
	e.must(expect.Locator(e.page.Locator("#create-job-hint")).ToContainText("svc jobs create"))
	e.must(e.page.Locator("#create-slug").Fill("first"))
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.testid("create-job-error")).ToContainText("Base model"))
	e.must(expect.Locator(e.testid("create-job-error")).ToContainText("svc jobs create"))
	e.shot("first-run-no-job")

	// Base model works with nothing else to set up.
	e.must(e.testid("kind-base_model").Check())
	e.must(expect.Locator(e.page.Locator("#create-model option[value='sim-llama-3.1-8b-instruct']")).ToHaveCount(1))
	_, err := e.page.Locator("#create-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-llama-3.1-8b-instruct"}})
	e.must(err)
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.row("first")).ToHaveAttribute("data-new", "true"))
}

// Point 3: the step is chosen among the job's checkpoints, and a step problem is reported under Step.
func TestCheckpointStepIsPickedAndItsErrorShownUnderStep(t *testing.T) {
	e := newEnv(t)
	job := e.registerJob()    // checkpoint at step 100
	dir := e.api.ArtifactsDir // local artifacts must be in the server's artifacts folder
	ckpt := filepath.Join(dir, "checkpoint-250")
	e.must(os.WriteFile(ckpt, []byte("weights"), 0o644))
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	_, err = cl.UpdateJob(context.Background(), job.ID, cloudapi.UpdateJobRequest{Checkpoints: []cloudapi.Checkpoint{{Step: 250, Artifact: ckpt}}})
	e.must(err)
	bare, err := cl.CreateJob(context.Background(), cloudapi.CreateJobRequest{BaseModel: "sim-llama-3.1-8b-instruct"})
	e.must(err)

	e.open("#/endpoints")
	e.openCreate()
	e.must(e.page.Locator("#create-slug").Fill("ckpt"))
	e.must(e.testid("kind-checkpoint").Check())
	e.pickJob(job.ID)
	step := e.page.Locator("#create-step")
	e.must(expect.Locator(step.Locator("option[value='100']")).ToHaveCount(1))
	e.must(expect.Locator(step.Locator("option[value='250']")).ToHaveCount(1))

	// No step chosen: the error is under Step and names the job's steps; Job has none.
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.testid("create-step-error")).ToContainText("100, 250"))
	e.must(expect.Locator(e.testid("create-job-error")).ToBeEmpty())
	e.must(expect.Locator(e.page.Locator("#create-job")).ToHaveValue(job.ID))
	e.must(expect.Locator(step.Locator("option[value='250']")).ToHaveCount(1))
	e.shot("checkpoint-no-step")

	// A job without checkpoints says so in the Step picker, and under Step on submit.
	e.pickJob(bare.ID)
	e.must(expect.Locator(step).ToContainText("no checkpoints"))
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.testid("create-step-error")).ToContainText("no checkpoints"))
	e.must(expect.Locator(e.testid("create-job-error")).ToBeEmpty())

	// The right step creates it.
	e.pickJob(job.ID)
	e.must(expect.Locator(step.Locator("option[value='250']")).ToHaveCount(1))
	_, err = step.SelectOption(playwright.SelectOptionValues{Values: &[]string{"250"}})
	e.must(err)
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.row("ckpt").GetByTestId("target-summary")).ToHaveText("Checkpoint step 250 (job " + job.ID[:8] + ")"))
}

// Point 4: a route the studio does not have says so, on a fresh load and after navigation.
func TestUnknownRoute(t *testing.T) {
	e := newEnv(t)
	e.open("#/bogus")
	e.must(expect.Locator(e.testid("not-found-view")).ToBeVisible())
	e.must(expect.Locator(e.testid("not-found-view")).ToContainText("#/bogus"))
	e.must(expect.Locator(e.page.Locator("#main .loading")).ToHaveCount(0))
	e.must(expect.Locator(e.page.Locator("#main h1")).ToBeFocused())
	e.shot("unknown-route")
	e.must(e.testid("not-found-view").GetByRole("link", playwright.LocatorGetByRoleOptions{Name: "endpoints"}).Click())
	e.must(expect.Locator(e.testid("endpoint-list")).ToBeVisible())
	// A section the detail view does not have is not found either (an endpoint's sections are keys,
	// runs, usage and settings).
	_, err := e.page.Evaluate(`() => { location.hash = "#/endpoints/a/b"; }`)
	e.must(err)
	e.must(expect.Locator(e.testid("not-found-view")).ToBeVisible())
	e.must(expect.Locator(e.testid("not-found-view")).ToContainText("#/endpoints/a/b"))
	_, err = e.page.Evaluate(`() => { location.hash = "#/endpoints/a/keys/x"; }`)
	e.must(err)
	e.must(expect.Locator(e.testid("not-found-view")).ToContainText("#/endpoints/a/keys/x"))
}

// Point 5: after a create the studio says it was created, on the list, with a link to the new
// endpoint; a delete says so on the list; a deleted id and a stopped API say what happened.
func TestCreateAndDeleteConfirm(t *testing.T) {
	e := newEnv(t)
	e.open("#/endpoints")
	e.openCreate()
	// With the keyboard: the slug, the model (Base model is the default), Enter.
	e.must(e.page.Locator("#create-slug").Fill("confirm-me"))
	e.must(expect.Locator(e.page.Locator("#create-model option[value='sim-llama-3.1-8b-instruct']")).ToHaveCount(1))
	_, err := e.page.Locator("#create-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-llama-3.1-8b-instruct"}})
	e.must(err)
	e.must(e.page.Locator("#create-slug").Focus())
	e.must(e.page.Keyboard().Press("Enter"))
	e.must(expect.Locator(e.testid("create-dialog")).Not().ToBeVisible())
	e.must(expect.Locator(e.testid("notice")).ToContainText("Created endpoint confirm-me"))
	e.must(expect.Locator(e.row("confirm-me").GetByRole("link")).ToBeFocused())
	e.shot("created")
	// Enter on the new row's link opens the endpoint.
	e.must(e.page.Keyboard().Press("Enter"))
	e.must(expect.Locator(e.page.Locator("#main h1")).ToHaveText("confirm-me"))
	id, err := e.testid("endpoint-detail").GetAttribute("data-id")
	e.must(err)
	if h := e.hash(); h != "#/endpoints/"+id {
		t.Fatalf("hash %q after following the new row, want the new endpoint's", h)
	}

	e.section("settings")
	e.must(e.testid("delete").Click())
	e.must(expect.Locator(e.testid("empty-list")).ToBeVisible())
	e.must(expect.Locator(e.testid("notice")).ToContainText("Deleted endpoint confirm-me"))
	e.must(expect.Locator(e.page.Locator("#main h1")).ToBeFocused())
	e.shot("deleted")

	// The deleted id, opened again (a bookmark, the back button).
	e.open("#/endpoints/" + id)
	alert := e.testid("error-view").GetByRole("alert")
	e.must(expect.Locator(alert).ToContainText("may have been deleted"))
	e.must(expect.Locator(alert).Not().ToContainText("deployment not found"))

	// The API stopped: the message names the URL it tried.
	e.must(e.closeAPI())
	_, err = e.page.Reload()
	e.must(err)
	e.must(expect.Locator(e.testid("error-view").GetByRole("alert")).ToContainText(e.api.BaseURL))
}

// Point 6: the runs card names the key by its label, and a run opens with its request, response,
// tokens, latency, status and key.
func TestRunDetailOpensFromTheRunsCard(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cl, err := e.local.ScopedClient(ctx)
	e.must(err)
	d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
		Slug: "runs-detail", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
	})
	e.must(err)
	k, err := cl.IssueDeploymentKey(ctx, d.ID, "ci-pipeline")
	e.must(err)
	req, err := http.NewRequest(http.MethodPost, e.api.BaseURL+"/e/runs-detail/v1/chat/completions",
		strings.NewReader(`{"messages": [{"role": "user", "content": "Hello from the runs card"}]}`))
	e.must(err)
	req.Header.Set("Authorization", "Bearer "+k.Plaintext)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	e.must(err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("edge call: %d", resp.StatusCode)
	}
	e.api.Flush()

	e.open("#/endpoints/" + d.ID)
	row := e.testid("run-row")
	e.must(expect.Locator(row).ToHaveCount(1))
	e.must(expect.Locator(row.GetByTestId("run-key")).ToHaveText("ci-pipeline"))

	open := row.GetByTestId("run-open")
	e.must(open.Focus())
	e.must(e.page.Keyboard().Press("Enter"))
	detail := e.testid("run-detail")
	e.must(expect.Locator(detail).ToBeVisible())
	e.must(expect.Locator(detail.GetByTestId("run-request")).ToContainText("Hello from the runs card"))
	e.must(expect.Locator(detail.GetByTestId("run-response")).ToContainText("choices"))
	e.must(expect.Locator(detail.GetByTestId("run-key-label")).ToContainText("ci-pipeline"))
	e.must(expect.Locator(detail.GetByTestId("run-key-label")).ToContainText(k.Key.Prefix))
	e.must(expect.Locator(detail.GetByTestId("run-status")).ToHaveText("ok"))
	e.must(expect.Locator(detail).ToContainText(" ms"))
	e.must(expect.Locator(detail).ToContainText("prompt"))
	e.shot("run-detail")
	e.must(e.page.Keyboard().Press("Escape"))
	e.must(expect.Locator(detail).Not().ToBeVisible())
	e.must(expect.Locator(open).ToBeFocused())
}

// Point 7: a whole journey, failed create included, leaves nothing in the console: no htmx
// complaint, no CSP violation, no missing favicon.
func TestConsoleStaysCleanThroughAJourney(t *testing.T) {
	e := newEnv(t)
	e.open("")
	e.must(expect.Locator(e.testid("empty-list")).ToBeVisible())
	e.openCreate()
	e.must(e.page.Locator("#create-slug").Fill("clean"))
	e.must(expect.Locator(e.page.Locator("#create-model option[value='sim-llama-3.1-8b-instruct']")).ToHaveCount(1))
	_, err := e.page.Locator("#create-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-llama-3.1-8b-instruct"}})
	e.must(err)
	e.must(e.testid("create-submit").Click())
	e.must(e.testid("notice-open").Click())
	e.must(expect.Locator(e.page.Locator("#main h1")).ToHaveText("clean"))
	e.section("keys")
	e.must(e.testid("new-key").Click())
	e.must(e.testid("key-label-input").Fill("laptop"))
	e.must(e.testid("key-submit").Click())
	e.must(expect.Locator(e.testid("key-plaintext")).ToBeVisible())
	e.must(e.testid("key-done").Click())
	e.section("settings")
	e.must(e.testid("disable").Click())
	e.must(expect.Locator(e.testid("enable")).ToBeVisible())
	e.must(e.testid("enable").Click())
	e.section("runs")
	e.must(e.testid("runs-refresh").Click())
	e.section("usage")
	e.section("keys")
	e.must(e.testid("revoke").Click())
	e.must(expect.Locator(e.testid("key-revoked")).ToBeVisible())
	e.must(e.page.Locator(".crumbs a").Click())
	e.must(expect.Locator(e.row("clean")).ToBeVisible())
	e.page.WaitForTimeout(300) // late console lines (the favicon) arrive after the view
	e.checkConsole()

	// A failed create: the form shows the error, and the console stays clean too.
	e.openCreate()
	e.must(e.page.Locator("#create-slug").Fill("clean"))
	e.must(expect.Locator(e.page.Locator("#create-model option[value='sim-llama-3.1-8b-instruct']")).ToHaveCount(1))
	_, err = e.page.Locator("#create-model").SelectOption(playwright.SelectOptionValues{Values: &[]string{"sim-llama-3.1-8b-instruct"}})
	e.must(err)
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.testid("create-slug-error")).ToContainText("clean"))
	e.must(e.testid("kind-checkpoint").Check())
	e.must(e.testid("create-submit").Click())
	e.must(expect.Locator(e.testid("create-job-error")).Not().ToBeEmpty())
	e.page.WaitForTimeout(300)
}

// The list follows the cloud's pages: the first page, then "Show more" adds the next until the last.
func TestListShowsMoreByPages(t *testing.T) {
	e := newEnvWith(t, func(o *studio.Options) { o.ListPageSize = 2 })
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	for _, slug := range []string{"page-a", "page-b", "page-c", "page-d", "page-e"} {
		_, err := cl.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{Slug: slug,
			Target: cloudapi.Target{Kind: "base_model", Model: "sim-llama-3.1-8b-instruct"}})
		e.must(err)
	}
	e.open("#/endpoints")
	rows := e.testid("endpoint-row")
	e.must(expect.Locator(rows).ToHaveCount(2))
	shown := 2
	for _, want := range []int{4, 5} {
		e.must(e.testid("list-more").Click())
		e.must(expect.Locator(rows).ToHaveCount(want))
		// The keyboard stays where the new rows begin: on the first new row's link.
		e.must(expect.Locator(rows.Nth(shown).Locator("a.slug-link")).ToBeFocused())
		shown = want
	}
	e.must(expect.Locator(e.testid("list-more")).ToHaveCount(0))
	// Every endpoint is listed once.
	got, err := e.page.Locator("[data-testid=endpoint-row]").EvaluateAll("rs => rs.map(r => r.dataset.slug)")
	e.must(err)
	seen := map[string]bool{}
	for _, s := range got.([]any) {
		seen[s.(string)] = true
	}
	if len(seen) != 5 {
		t.Fatalf("listed %v", got)
	}
}

// Issue 31, point 1: the detail page is a console. With 20 keys, at a laptop and a phone width, the
// quick start is on the first screen of the overview, each section is one click away on the tab bar
// (its tab marked current, its heading focused, the URL its own), and the browser's back button
// returns to the previous section.
func TestDetailSectionsOneClickAway(t *testing.T) {
	e := newEnv(t)
	cl, err := e.local.ScopedClient(context.Background())
	e.must(err)
	d, err := cl.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{
		Slug: "sections", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
	})
	e.must(err)
	for i := 0; i < 20; i++ {
		_, err := cl.IssueDeploymentKey(context.Background(), d.ID, "key-"+strconv.Itoa(i)+"-"+strings.Repeat("x", 60))
		e.must(err)
	}
	sections := []struct{ tab, hash, heading, testid string }{
		{"keys", "/keys", "API keys", "keys"},
		{"runs", "/runs", "Recent runs", "runs"},
		{"usage", "/usage", "Usage", "usage"},
		{"settings", "/settings", "Settings", "limits"},
	}
	for _, size := range [][2]int{{1280, 800}, {390, 844}} {
		w := strconv.Itoa(size[0])
		e.must(e.page.SetViewportSize(size[0], size[1]))
		e.open("#/endpoints/" + d.ID)
		e.must(expect.Locator(e.testid("tab-overview")).ToHaveAttribute("aria-current", "page"))
		qs := e.testid("quickstart")
		e.must(expect.Locator(qs).ToBeVisible())
		b, err := qs.BoundingBox()
		e.must(err)
		if b.Y < 0 || b.Y+b.Height > float64(size[1]) {
			t.Fatalf("at %s the quick start sits at y %.0f–%.0f, not within the first %d px", w, b.Y, b.Y+b.Height, size[1])
		}
		e.must(expect.Locator(e.testid("endpoint-url")).ToHaveText(d.URL))
		e.must(expect.Locator(e.testid("state-summary")).ToContainText("Enabled"))
		e.shotAt("console-overview", size[0])

		for _, s := range sections {
			e.must(e.testid("tab-" + s.tab).Click())
			e.must(expect.Locator(e.testid("tab-"+s.tab)).ToHaveAttribute("aria-current", "page"))
			e.must(expect.Locator(e.testid("tab-overview")).Not().ToHaveAttribute("aria-current", "page"))
			if h := e.hash(); h != "#/endpoints/"+d.ID+s.hash {
				t.Fatalf("at %s the %s tab leads to %q", w, s.tab, h)
			}
			e.must(expect.Locator(e.testid(s.testid)).ToBeVisible())
			e.must(expect.Locator(e.page.Locator("#detail-section h2").First()).ToBeFocused())
			e.must(expect.Locator(e.page.Locator("#detail-section h2").First()).ToContainText(s.heading))
			// The tab is reachable where it is (the bar scrolls sideways at phone width, never off the page).
			e.reachable(e.testid("tab-"+s.tab), e.testid("detail-tabs"), "the "+s.tab+" tab at "+w)
		}
		e.must(expect.Locator(e.testid("key-row")).ToHaveCount(0)) // Settings shows no keys
		// Back returns to the previous section, swapped in again.
		_, err = e.page.GoBack()
		e.must(err)
		e.must(expect.Locator(e.testid("tab-usage")).ToHaveAttribute("aria-current", "page"))
		e.must(expect.Locator(e.testid("usage")).ToBeVisible())
		e.must(e.testid("tab-keys").Click())
		e.must(expect.Locator(e.testid("key-row")).ToHaveCount(20))
		e.shotAt("console-keys", size[0])
	}
}
