package studio

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// scopedHarness has anonymous credentials and a state file, so every route talks to the fake.
func scopedHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.writeCreds(cloudapi.KindAnonymous)
	h.writeState()
	return h
}

func TestDeploymentRoutesJSON(t *testing.T) {
	h := scopedHarness(t)

	// Create.
	var d cloudapi.Deployment
	r := h.api(http.MethodPost, "/api/deployments", cloudapi.CreateDeploymentRequest{
		Slug: "alpha", Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: "0123456789abcdef"},
	})
	wantStatus(t, r, http.StatusCreated)
	r.decode(t, &d)
	if d.Slug != "alpha" || d.AuthMode != cloudapi.AuthFixedAPIKey || d.ID == "" {
		t.Fatalf("created %+v", d)
	}

	// List.
	var list deploymentsBody
	r = h.api(http.MethodGet, "/api/deployments", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &list)
	if len(list.Deployments) != 1 || list.Deployments[0].ID != d.ID {
		t.Fatalf("list %+v", list)
	}

	// Update: disable, then switch the auth mode.
	off := false
	r = h.api(http.MethodPatch, "/api/deployments/"+d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off})
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &d)
	if d.Enabled {
		t.Fatal("still enabled")
	}
	none := cloudapi.AuthNone
	r = h.api(http.MethodPatch, "/api/deployments/"+d.ID, cloudapi.UpdateDeploymentRequest{AuthMode: &none})
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &d)
	if d.AuthMode != cloudapi.AuthNone {
		t.Fatalf("auth mode %q", d.AuthMode)
	}
	fixed := cloudapi.AuthFixedAPIKey
	wantStatus(t, h.api(http.MethodPatch, "/api/deployments/"+d.ID, cloudapi.UpdateDeploymentRequest{AuthMode: &fixed}), http.StatusOK)

	// Issue a key: the plaintext comes back once.
	var issued cloudapi.IssuedKey
	r = h.api(http.MethodPost, "/api/deployments/"+d.ID+"/keys", map[string]string{"label": "ci"})
	wantStatus(t, r, http.StatusCreated)
	r.decode(t, &issued)
	if issued.Plaintext == "" || issued.Key.Label != "ci" || !issued.Key.Enabled {
		t.Fatalf("issued %+v", issued)
	}

	// Detail: the deployment and its keys, without any plaintext.
	var detail deploymentDetail
	r = h.api(http.MethodGet, "/api/deployments/"+d.ID, nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &detail)
	if detail.Slug != "alpha" || len(detail.Keys) != 1 || detail.Keys[0].Label != "ci" {
		t.Fatalf("detail %+v", detail)
	}
	if strings.Contains(r.body, issued.Plaintext) {
		t.Fatal("the detail shows the plaintext again")
	}

	// Revoke.
	var k cloudapi.Key
	r = h.api(http.MethodPost, "/api/deployments/"+d.ID+"/keys/"+issued.Key.ID+"/revoke", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &k)
	if k.Enabled {
		t.Fatal("key still enabled")
	}

	// Delete, then it is gone with the upstream status.
	r = h.api(http.MethodDelete, "/api/deployments/"+d.ID, nil)
	wantStatus(t, r, http.StatusNoContent)
	r = h.api(http.MethodGet, "/api/deployments/"+d.ID, nil)
	wantStatus(t, r, http.StatusNotFound)
	if e := r.envelope(t); e.Code != "not_found" || e.Message != "No endpoint with this id." {
		t.Errorf("envelope %+v", e)
	}
	// The page is told what a user meets: an endpoint that may have been deleted.
	f := h.api(http.MethodGet, "/api/deployments/"+d.ID, nil, asHTMX, withHeader(hxTarget, "main"))
	wantStatus(t, f, http.StatusNotFound)
	if !strings.Contains(f.body, "There is no endpoint "+d.ID+" in this project: it may have been deleted.") {
		t.Errorf("deleted endpoint fragment: %s", f.body)
	}
}

// Cloud errors keep their upstream status, code and message.
func TestUpstreamErrorsPassThrough(t *testing.T) {
	h := scopedHarness(t)
	h.cloud.add(deployment("taken"))
	r := h.api(http.MethodPost, "/api/deployments", createBody("taken"))
	wantStatus(t, r, http.StatusConflict)
	if e := r.envelope(t); e.Code != "slug_taken" || !strings.Contains(e.Message, `"taken" is already taken`) {
		t.Errorf("envelope %+v", e)
	}
	r = h.api(http.MethodPost, "/api/deployments", createBody("www"))
	wantStatus(t, r, http.StatusBadRequest)
	if e := r.envelope(t); e.Code != "reserved_slug" {
		t.Errorf("envelope %+v", e)
	}
}

func TestCloudDownIsBadGateway(t *testing.T) {
	h := scopedHarness(t)
	h.cloud.srv.Close()
	r := h.api(http.MethodGet, "/api/deployments", nil)
	wantStatus(t, r, http.StatusBadGateway)
	if e := r.envelope(t); e.Code != "upstream_unreachable" {
		t.Errorf("envelope %+v", e)
	}
	// htmx: the error fragment, in the view it was loading, answered 200 with the status beside it,
	// so that the browser's console stays quiet about an error the page shows.
	f := h.api(http.MethodGet, "/api/deployments", nil, asHTMX)
	if f.status != http.StatusOK || f.header.Get(svcStatus) != "502" || !strings.Contains(f.body, `role="alert"`) {
		t.Errorf("fragment %d (%s %q) %s", f.status, svcStatus, f.header.Get(svcStatus), f.body)
	}
}

func TestCreateFormFragment(t *testing.T) {
	h := scopedHarness(t)
	h.cloud.add(deployment("taken"))
	post := func(v url.Values) response {
		return h.api(http.MethodPost, "/api/deployments", v.Encode(), asHTMX, asForm)
	}

	// 409: the form comes back with the upstream message next to the slug, values kept.
	r := post(url.Values{"slug": {"taken"}, "kind": {"base_model"}, "model": {"demo-echo"}, "authMode": {"fixed_api_key"}})
	wantStatus(t, r, http.StatusConflict)
	for _, want := range []string{`id="create-form"`, `The slug &#34;taken&#34; is already taken`, `value="taken"`, `id="create-slug-error"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("409 form lacks %q: %s", want, r.body)
		}
	}

	// Studio-side field errors: no upstream call. Without a job, the message says how to get one
	// and what needs none.
	before := h.cloud.callCount()
	r = post(url.Values{"slug": {"ok-slug"}, "kind": {"final_adapter"}, "authMode": {"none"}})
	wantStatus(t, r, http.StatusBadRequest)
	for _, want := range []string{"Choose the job", "svc jobs create", "Base model"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the job error lacks %q: %s", want, r.body)
		}
	}
	if h.cloud.callCount() != before {
		t.Fatalf("form errors reached upstream: %v", h.cloud.callList())
	}

	// A checkpoint without a step: the error is under Step and names the job's steps, read from the
	// job (a read, nothing created).
	h.cloud.jobs = []cloudapi.Job{{ID: "job-1", BaseModel: "demo-echo", Status: "running",
		Checkpoints: []cloudapi.Checkpoint{{Step: 100, Artifact: "s3://a/100"}, {Step: 200, Artifact: "s3://a/200"}}}}
	r = post(url.Values{"slug": {"ok-slug"}, "kind": {"checkpoint"}, "jobId": {"job-1"}, "step": {""}, "authMode": {"fixed_api_key"}})
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, `data-testid="create-step-error">Choose one of the job&#39;s checkpoints: steps 100, 200.</p>`) ||
		!strings.Contains(r.body, `data-testid="create-job-error"></p>`) {
		t.Errorf("the step error is not under Step: %s", r.body)
	}
	for _, call := range h.cloud.callList()[before:] {
		if !strings.HasPrefix(call, "GET ") {
			t.Errorf("a form error made %s", call)
		}
	}

	// The cloud's own word on a missing checkpoint is about the step, so it goes under Step too.
	e := &apiError{Status: http.StatusBadRequest, Code: "invalid_target", Message: "job job-1 has no checkpoint at step 7"}
	if got := createField(e, "checkpoint"); got != "step" {
		t.Errorf("a missing checkpoint goes under %q, want step", got)
	}
	if got := createField(&apiError{Code: "invalid_target", Message: "job x is not a job of this project"}, "checkpoint"); got != "jobId" {
		t.Errorf("a foreign job goes under %q, want jobId", got)
	}

	// Success: the form closes and the list reloads (docs/API.md, rule 4). The list, read afresh from
	// the cloud, replaces #main with the new row marked; the dialog is told (after the swap) to close;
	// a notice links to the new endpoint's page, and a fresh form, on Base model, rides along.
	r = post(url.Values{"slug": {"fresh"}, "kind": {"checkpoint"}, "jobId": {"0123456789abcdef"}, "step": {"200"}, "authMode": {"none"}})
	wantStatus(t, r, http.StatusCreated)
	var ev struct {
		Created createdEvent `json:"svc:created"`
	}
	if err := json.Unmarshal([]byte(r.header.Get(hxTriggerAfterSettle)), &ev); err != nil || r.header.Get(hxRetarget) != "#main" ||
		ev.Created.Slug != "fresh" || ev.Created.ID == "" || ev.Created.Notice != "Created endpoint fresh." {
		t.Errorf("headers %v (%v)", r.header, err)
	}
	for _, want := range []string{`data-testid="endpoint-list"`, `data-slug="taken"`, "Checkpoint step 200 (job 01234567)",
		`data-slug="fresh" class="row-new" data-new="true"`, `data-testid="new-badge"`,
		`id="flash"`, `hx-swap-oob="innerHTML"`, `href="#/endpoints/` + ev.Created.ID + `" data-testid="notice-open">Open fresh</a>`,
		`hx-swap-oob="true"`, `value="base_model" checked`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("success lacks %q:\n%s", want, r.body)
		}
	}
	if n := strings.Count(r.body, `data-new="true"`); n != 1 {
		t.Errorf("%d rows marked new, want the one created", n)
	}
	if calls := h.cloud.callList(); calls[len(calls)-1] != "GET /v1/orgs/anon-org/projects/default/deployments" {
		t.Errorf("the list was not read again after the create: %v", calls)
	}

	// The list cannot be read after the create: the endpoint exists all the same, so the form still
	// closes and the notice still links to it, over the list's error view with its Retry.
	h.cloud.failList = true
	r = post(url.Values{"slug": {"second"}, "kind": {"base_model"}, "model": {"demo-echo"}, "authMode": {"fixed_api_key"}})
	wantStatus(t, r, http.StatusCreated)
	for _, want := range []string{`data-testid="error-view"`, "The endpoints could not be loaded", `data-testid="retry"`, "Open second"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("create with a failing list lacks %q:\n%s", want, r.body)
		}
	}
}

func TestListFragmentSummaries(t *testing.T) {
	h := scopedHarness(t)
	h.cloud.add(cloudapi.Deployment{Slug: "fa", Target: cloudapi.Target{Kind: cloudapi.TargetFinalAdapter, JobID: "abcdef0123456789"}})
	h.cloud.add(cloudapi.Deployment{Slug: "cp", Target: cloudapi.Target{Kind: cloudapi.TargetCheckpoint, JobID: "abcdef0123456789", Step: 40}})
	h.cloud.add(cloudapi.Deployment{Slug: "bm", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "demo-echo"}, AuthMode: cloudapi.AuthNone})
	h.cloud.add(cloudapi.Deployment{Slug: "mm", Target: cloudapi.Target{Kind: cloudapi.TargetMultiModel}})
	r := h.api(http.MethodGet, "/api/deployments", nil, asHTMX)
	wantStatus(t, r, http.StatusOK)
	for _, want := range []string{
		"Final adapter (job abcdef01)", "Checkpoint step 40 (job abcdef01)", "Base model: demo-echo", "All public models",
		`data-testid="endpoint-url">http://<wbr>fa<wbr>.localhost:8080</code>`, "none (public)", "Disabled",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("list lacks %q", want)
		}
	}
}

func TestDetailFragmentAndActions(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("demo"))
	h.cloud.addKey(d.ID, cloudapi.Key{ID: "k1", Label: "laptop", Prefix: "sk-ep-abcdef", Enabled: true})
	sections := map[string][]string{
		"":         {`data-testid="endpoint-detail"`, "Keep for 7 days", "Base model: demo-echo", h.cloud.srv.URL + "/e/demo/v1/chat/completions", "Authorization: Bearer &lt;API_KEY&gt;"},
		"keys":     {"laptop", "sk-ep-abcdef"},
		"settings": {"opens the URL to everyone"},
	}
	for sec, wants := range sections {
		r := h.api(http.MethodGet, "/api/deployments/"+d.ID+"?section="+sec, nil, asHTMX)
		wantStatus(t, r, http.StatusOK)
		for _, want := range wants {
			if !strings.Contains(r.body, want) {
				t.Errorf("detail section %q lacks %q", sec, want)
			}
		}
	}

	// Disable from the Settings section: the detail comes back on that section, now disabled.
	onSettings := withHeader("HX-Current-URL", "http://127.0.0.1:7777/#/endpoints/"+d.ID+"/settings")
	r := h.api(http.MethodPatch, "/api/deployments/"+d.ID, "enabled=false", asHTMX, asForm, onSettings)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.body, `data-testid="enable"`) {
		t.Errorf("no enable button after disabling: %s", r.body)
	}
	// Auth mode none: the warning shows and the cURL sample (on the overview) drops the header.
	r = h.api(http.MethodPatch, "/api/deployments/"+d.ID, "authMode=none", asHTMX, asForm, onSettings)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.body, `data-testid="auth-warning"`) {
		t.Errorf("none mode detail: %s", r.body)
	}
	r = h.api(http.MethodGet, "/api/deployments/"+d.ID, nil, asHTMX)
	if strings.Contains(r.body, "Authorization: Bearer") {
		t.Errorf("none mode quick start: %s", r.body)
	}
	if !strings.Contains(r.body, `&#34;not-needed&#34;`) {
		t.Error("SDK samples lack the placeholder key")
	}
	// A bad form value is refused before any upstream call.
	before := h.cloud.callCount()
	r = h.api(http.MethodPatch, "/api/deployments/"+d.ID, "authMode=open", asHTMX, asForm)
	wantStatus(t, r, http.StatusBadRequest)
	if r.header.Get(hxRetarget) != "#flash" || h.cloud.callCount() != before {
		t.Errorf("bad update: retarget %q, calls %d", r.header.Get(hxRetarget), h.cloud.callCount()-before)
	}

	// Delete from the page: back to the list.
	r = h.api(http.MethodDelete, "/api/deployments/"+d.ID, nil, asHTMX)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.header.Get(hxTrigger), "svc:navigate") || r.header.Get(hxReswap) != "none" {
		t.Errorf("delete headers %v", r.header)
	}
}

func TestKeyModalFragments(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("keys"))
	path := "/api/deployments/" + d.ID + "/keys"

	// The label is prompted: empty and too long are refused by the studio itself.
	before := h.cloud.callCount()
	for _, label := range []string{"", "   ", strings.Repeat("é", 81)} {
		r := h.api(http.MethodPost, path, url.Values{"label": {label}}.Encode(), asHTMX, asForm)
		wantStatus(t, r, http.StatusBadRequest)
		if !strings.Contains(r.body, "1 to 80 characters") || !strings.Contains(r.body, `data-testid="key-form"`) {
			t.Errorf("label %q: %s", label, r.body)
		}
	}
	r := h.api(http.MethodPost, path, map[string]string{"label": ""})
	if wantStatus(t, r, http.StatusBadRequest); r.envelope(t).Code != "invalid_label" {
		t.Error("JSON label error code")
	}
	if h.cloud.callCount() != before {
		t.Fatal("invalid labels reached upstream")
	}

	// 80 characters is fine; the plaintext is shown once with the warning, the table rides along.
	label := strings.Repeat("é", 80)
	r = h.api(http.MethodPost, path, url.Values{"label": {label}}.Encode(), asHTMX, asForm)
	wantStatus(t, r, http.StatusCreated)
	for _, want := range []string{`data-testid="key-plaintext"`, "sk-ep-secret", "cannot be shown again", `id="keys"`, `hx-swap-oob="true"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("issued view lacks %q", want)
		}
	}
	if r.header.Get("Cache-Control") != "no-store" {
		t.Error("the plaintext may be cached")
	}

	// A duplicate label: 409 from upstream, shown in the modal.
	r = h.api(http.MethodPost, path, url.Values{"label": {label}}.Encode(), asHTMX, asForm)
	wantStatus(t, r, http.StatusConflict)
	if !strings.Contains(r.body, "already has this label") {
		t.Errorf("409 modal: %s", r.body)
	}

	// Revoke from the page: the table comes back with the key revoked.
	var detail deploymentDetail
	h.api(http.MethodGet, "/api/deployments/"+d.ID, nil).decode(t, &detail)
	r = h.api(http.MethodPost, path+"/"+detail.Keys[0].ID+"/revoke", nil, asHTMX)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.body, `data-testid="key-revoked"`) {
		t.Errorf("revoked table: %s", r.body)
	}
}

func TestJobsAndModels(t *testing.T) {
	h := scopedHarness(t)
	final := "file:///tmp/adapter"
	h.cloud.jobs = []cloudapi.Job{{ID: "11111111-2222", BaseModel: "demo-echo", Status: "completed", FinalAdapter: &final,
		Checkpoints: []cloudapi.Checkpoint{{Step: 100, Artifact: "s3://a/100"}, {Step: 250, Artifact: "s3://a/250"}}}}
	var jobs jobsBody
	r := h.do(http.MethodGet, "/api/jobs", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &jobs)
	if len(jobs.Jobs) != 1 {
		t.Fatalf("jobs %+v", jobs)
	}
	f := h.do(http.MethodGet, "/api/jobs?selected=11111111-2222", nil, asHTMX)
	// Each job carries its checkpoints' steps, which fill the step picker.
	if !strings.Contains(f.body, `<option value="11111111-2222" selected data-steps="100 250">11111111 · demo-echo · completed · final adapter · 2 checkpoints</option>`) {
		t.Errorf("job options: %s", f.body)
	}
	var models modelsBody
	r = h.do(http.MethodGet, "/api/models", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &models)
	if len(models.Models) != 1 || models.Models[0].ID != "demo-echo" {
		t.Fatalf("models %+v", models)
	}
	f = h.do(http.MethodGet, "/api/models", nil, asHTMX)
	if !strings.Contains(f.body, "demo-echo (simulated)") {
		t.Errorf("model options: %s", f.body)
	}
}

func TestChatPlayground(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("chatty"))

	var reply chatReply
	r := h.api(http.MethodPost, "/api/inference/chat", chatRequest{DeploymentID: d.ID, Message: "hi", APIKey: "good-key"})
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &reply)
	if reply.Reply != "echo: hi" || reply.Model != "demo-echo" {
		t.Fatalf("reply %+v", reply)
	}
	if h.cloud.lastAuth != "Bearer good-key" {
		t.Errorf("edge saw %q", h.cloud.lastAuth)
	}

	// A wrong key: the edge's status and message, never the key.
	r = h.api(http.MethodPost, "/api/inference/chat", chatRequest{DeploymentID: d.ID, Message: "hi", APIKey: "bad-key-value"})
	wantStatus(t, r, http.StatusUnauthorized)
	if e := r.envelope(t); e.Code != "invalid_api_key" || e.Message != "Invalid API key." {
		t.Errorf("envelope %+v", e)
	}
	if strings.Contains(r.body, "bad-key-value") {
		t.Fatal("the key was echoed back")
	}

	// From the page: the answer fragment.
	form := url.Values{"deploymentId": {d.ID}, "message": {"hi"}, "apiKey": {"good-key"}}
	r = h.api(http.MethodPost, "/api/inference/chat", form.Encode(), asHTMX, asForm)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.body, `data-testid="chat-reply"`) || !strings.Contains(r.body, "echo: hi") {
		t.Errorf("chat fragment: %s", r.body)
	}
	r = h.api(http.MethodPost, "/api/inference/chat", chatRequest{DeploymentID: d.ID})
	wantStatus(t, r, http.StatusBadRequest)
}

func TestUnknownRouteIsJSON404(t *testing.T) {
	h := newHarness(t)
	r := h.do(http.MethodGet, "/api/nothing", nil)
	wantStatus(t, r, http.StatusNotFound)
	if e := r.envelope(t); e.Code != "not_found" {
		t.Errorf("envelope %+v", e)
	}
	if r := h.do(http.MethodGet, "/static/app.js", nil); r.status != http.StatusOK || !strings.Contains(r.body, "X-CSRF-Token") {
		t.Errorf("static app.js: %d", r.status)
	}
}
