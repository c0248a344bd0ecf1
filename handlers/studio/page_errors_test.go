package studio

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

// The page's expected errors arrive as 200 with their status in Svc-Status, so that the browser's
// console stays quiet (renderHTML); JSON callers keep the cloud's status and wording.
func TestPageErrorsAreAnswered200WithTheirStatus(t *testing.T) {
	h := scopedHarness(t)
	h.cloud.add(deployment("taken"))
	form := url.Values{"slug": {"taken"}, "kind": {"base_model"}, "model": {"demo-echo"}, "authMode": {"fixed_api_key"}}
	for _, c := range []struct {
		name, method, path, body string
		json                     any // the same request from a JSON caller; nil: body as is
		opts                     []reqOpt
		status                   int
	}{
		{"taken slug", http.MethodPost, "/api/deployments", form.Encode(), createBody("taken"), []reqOpt{asForm}, http.StatusConflict},
		{"unknown id", http.MethodGet, "/api/deployments/nope", "", nil, []reqOpt{withTarget("main")}, http.StatusNotFound},
		{"bad update", http.MethodPatch, "/api/deployments/nope", "authMode=open", nil, []reqOpt{asForm}, http.StatusBadRequest},
		{"no token", http.MethodGet, "/api/deployments", "", nil, []reqOpt{withCSRF("wrong")}, http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.api(c.method, c.path, c.body, append([]reqOpt{asHTMX}, c.opts...)...)
			if r.status != http.StatusOK || r.header.Get(svcStatus) != itoa(c.status) {
				t.Fatalf("HTTP %d, %s %q; want 200 and %d", r.status, svcStatus, r.header.Get(svcStatus), c.status)
			}
			var j response
			if c.json != nil {
				j = h.api(c.method, c.path, c.json)
			} else {
				j = h.api(c.method, c.path, c.body, c.opts...)
			}
			if j.status != c.status || j.header.Get(svcStatus) != "" {
				t.Fatalf("JSON: HTTP %d (%s %q), want %d", j.status, svcStatus, j.header.Get(svcStatus), c.status)
			}
		})
	}
}

// A view that failed to load says which, offers Retry unless the thing is not there, and links to
// the list only from another view; its alert cannot be dismissed (it is all the view shows).
func TestErrorViews(t *testing.T) {
	h := scopedHarness(t)
	r := h.api(http.MethodGet, "/api/deployments/gone", nil, asHTMX, withTarget("main"))
	wantStatus(t, r, http.StatusNotFound)
	for _, want := range []string{`data-testid="error-view"`, `<h1 id="error-title">Endpoint not found</h1>`, `href="#/endpoints"`,
		"There is no endpoint gone in this project: it may have been deleted."} {
		if !strings.Contains(r.body, want) {
			t.Errorf("unknown endpoint view lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "data-retry") || strings.Contains(r.body, "data-dismiss") {
		t.Errorf("unknown endpoint view offers Retry or Dismiss:\n%s", r.body)
	}

	h.cloud.srv.Close()
	r = h.api(http.MethodGet, "/api/deployments", nil, asHTMX, withTarget("main"))
	wantStatus(t, r, http.StatusBadGateway)
	for _, want := range []string{`<h1 id="error-title">The endpoints could not be loaded</h1>`, `data-retry`, "Is the server running?"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("list error view lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, `href="#/endpoints"`) || strings.Contains(r.body, "data-dismiss") {
		t.Errorf("the list's error view links to itself or can be dismissed away:\n%s", r.body)
	}

	// The Fleet page says which view failed, with Retry and the way back to the list.
	r = h.do(http.MethodGet, "/api/fleet", nil, asHTMX, withTarget("main"))
	wantStatus(t, r, http.StatusBadGateway)
	for _, want := range []string{`<h1 id="error-title">The fleet could not be loaded</h1>`, `data-retry`, `href="#/endpoints"`, "Is the server running?"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("fleet error view lacks %q:\n%s", want, r.body)
		}
	}

	// The create form's pickers say it in their one option, not with markup a <select> cannot hold.
	r = h.do(http.MethodGet, "/api/models", nil, asHTMX, withTarget("create-model"))
	wantStatus(t, r, http.StatusBadGateway)
	if !strings.HasPrefix(r.body, `<option value="" data-testid="picker-error">Could not reach the cloud API`) {
		t.Errorf("picker error: %s", r.body)
	}
}

// Cloud messages reach the page as sentences (capitalised, no Markdown); JSON keeps them as they are.
func TestPageShowsCloudMessagesAsSentences(t *testing.T) {
	h := newHarness(t)
	h.writeCreds(cloudapi.KindOAuth)
	j := h.api(http.MethodPost, "/api/deployments", createBody("nope"))
	raw := j.envelope(t).Message
	if !strings.HasPrefix(raw, "no project state") || !strings.Contains(raw, "`svc use") {
		t.Fatalf("the SDK's wording changed, adapt this test: %q", raw)
	}
	form := url.Values{"slug": {"nope"}, "kind": {"base_model"}, "model": {"demo-echo"}, "authMode": {"fixed_api_key"}}
	r := h.api(http.MethodPost, "/api/deployments", form.Encode(), asHTMX, asForm)
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, `data-form-error>No project state: signed-in users must write`) ||
		!strings.Contains(r.body, "or run svc use --org ORG --project PROJECT in the project folder.</div>") || strings.Contains(r.body, "`") {
		t.Errorf("the form shows the message as it came:\n%s", r.body)
	}
}

// Disable asks first (enabling does not), and a disabled endpoint's quick start says that calls get
// 404 until it is enabled.
func TestDisableConfirmsAndDisabledQuickStartSaysSo(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("sleepy"))
	r := h.api(http.MethodGet, "/api/deployments/"+d.ID+"?section=settings", nil, asHTMX)
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.body, `hx-confirm="Disable sleepy? Calls to its URL will get 404 until you enable it again.`) {
		t.Errorf("Disable does not ask first:\n%s", r.body)
	}
	r = h.api(http.MethodGet, "/api/deployments/"+d.ID, nil, asHTMX)
	if strings.Contains(r.body, `data-testid="qs-disabled"`) {
		t.Error("an enabled endpoint's quick start warns of 404")
	}
	// Disabling from the Settings section shows Settings again (the page's hash route says which).
	r = h.api(http.MethodPatch, "/api/deployments/"+d.ID, "enabled=false", asHTMX, asForm,
		withHeader("HX-Current-URL", "http://127.0.0.1/#/endpoints/"+d.ID+"/settings"))
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.body, `data-testid="tab-settings" aria-current="page"`) {
		t.Errorf("after Disable the Settings tab is not the current one:\n%s", r.body)
	}
	enable := r.body[strings.Index(r.body, `data-testid="enable"`)-400:]
	if strings.Contains(enable[:strings.Index(enable, `data-testid="enable"`)], "hx-confirm") {
		t.Error("Enable asks for confirmation; only Disable should")
	}
	r = h.api(http.MethodGet, "/api/deployments/"+d.ID, nil, asHTMX)
	if !strings.Contains(r.body, `data-testid="qs-disabled"`) || !strings.Contains(r.body, "get 404 until you enable it") {
		t.Errorf("a disabled endpoint's quick start does not say calls get 404:\n%s", r.body)
	}
}

// Each section of the detail view has its own route; a tab's swap gets the section alone, a
// direct load the whole view with that tab current, and a section that does not exist a 404.
func TestDetailSections(t *testing.T) {
	h := scopedHarness(t)
	d := h.cloud.add(deployment("sleepy"))
	h.cloud.addKey(d.ID, cloudapi.Key{ID: "k1", Label: "ci", Prefix: "sk-ep-abc", Enabled: true})
	base := "/api/deployments/" + d.ID
	want := map[string]string{"": `data-testid="quickstart"`, "keys": `data-testid="key-row"`,
		"runs": `hx-get="` + base + `/runs"`, "usage": `data-testid="usage"`, "settings": `data-testid="limits"`,
		"canary": `data-testid="canary-form"`}
	for sec, mark := range want {
		full := h.api(http.MethodGet, base+"?section="+sec, nil, asHTMX)
		wantStatus(t, full, http.StatusOK)
		name := sec
		if name == "" {
			name = "overview"
		}
		if !strings.Contains(full.body, mark) || !strings.Contains(full.body, `data-testid="tab-`+name+`" aria-current="page"`) {
			t.Errorf("section %q: the full view lacks %s or its current tab:\n%s", sec, mark, full.body)
		}
		part := h.api(http.MethodGet, base+"?part=section&section="+sec, nil, asHTMX)
		wantStatus(t, part, http.StatusOK)
		if !strings.Contains(part.body, mark) || strings.Contains(part.body, `data-testid="detail-tabs"`) {
			t.Errorf("section %q: the partial is not the section alone:\n%s", sec, part.body)
		}
	}
	r := h.api(http.MethodGet, base+"?section=rollout", nil, asHTMX)
	wantStatus(t, r, http.StatusNotFound)
	if !strings.Contains(r.body, `no section \"rollout\"`) && !strings.Contains(r.body, "no section &#34;rollout&#34;") {
		t.Errorf("an unknown section is not named in the error:\n%s", r.body)
	}
	// The overview's glance asks for the latest 5 runs; a bad limit is refused in the JSON envelope.
	if r := h.api(http.MethodGet, base, nil, asHTMX); !strings.Contains(r.body, `hx-get="`+base+`/runs?limit=5"`) {
		t.Errorf("the overview does not load the latest 5 runs:\n%s", r.body)
	}
	r = h.api(http.MethodGet, base+"/runs?limit=0", nil)
	wantStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.body, `"code":"invalid_limit"`) {
		t.Errorf("limit=0: %s", r.body)
	}
}
