package studio

import (
	"errors"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

func deployment(slug string) cloudapi.Deployment {
	return cloudapi.Deployment{Slug: slug, Enabled: true, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "demo-echo"}}
}

func createBody(slug string) cloudapi.CreateDeploymentRequest {
	return cloudapi.CreateDeploymentRequest{Slug: slug, Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "demo-echo"}}
}

// No state file → an empty list and no upstream call, whatever the credentials (docs/API.md,
// "Studio loopback routes").
func TestListWithoutStateMakesNoUpstreamCall(t *testing.T) {
	for _, creds := range []string{"", cloudapi.KindAnonymous, cloudapi.KindOAuth} {
		t.Run("credentials="+creds, func(t *testing.T) {
			h := newHarness(t)
			if creds != "" {
				h.writeCreds(creds)
			}
			r := h.api(http.MethodGet, "/api/deployments", nil)
			wantStatus(t, r, http.StatusOK)
			if strings.TrimSpace(r.body) != `{"deployments":[]}` {
				t.Errorf("body %s", r.body)
			}
			frag := h.api(http.MethodGet, "/api/deployments", nil, asHTMX)
			wantStatus(t, frag, http.StatusOK)
			if !strings.Contains(frag.body, `data-testid="empty-list"`) {
				t.Errorf("fragment shows no empty list: %s", frag.body)
			}
			jobs := h.do(http.MethodGet, "/api/jobs", nil)
			wantStatus(t, jobs, http.StatusOK)
			if strings.TrimSpace(jobs.body) != `{"jobs":[]}` {
				t.Errorf("jobs %s", jobs.body)
			}
			if calls := h.cloud.callList(); len(calls) != 0 {
				t.Fatalf("upstream calls without a state file: %v", calls)
			}
			if h.stateExists() {
				t.Fatal("listing wrote the state file")
			}
		})
	}
}

// A signed-in user without a state file sees why the list is empty: the file and its fields.
func TestSignedInListWithoutStateExplains(t *testing.T) {
	h := newHarness(t)
	h.writeCreds(cloudapi.KindOAuth)
	frag := h.api(http.MethodGet, "/api/deployments", nil, asHTMX)
	for _, want := range []string{`data-testid="list-notice">No project state:`, h.state, "orgSlug", "projectSlug", "projectId"} {
		if !strings.Contains(frag.body, want) {
			t.Errorf("notice lacks %q: %s", want, frag.body)
		}
	}
	if strings.Contains(frag.body, "`") {
		t.Errorf("the notice shows Markdown: %s", frag.body)
	}
	if n := h.cloud.callCount(); n != 0 {
		t.Fatalf("%d upstream calls", n)
	}
}

// The state file is written lazily, for anonymous credentials, on the first create.
func TestFirstCreateWritesStateForAnonymous(t *testing.T) {
	h := newHarness(t)
	h.writeCreds(cloudapi.KindAnonymous)
	r := h.api(http.MethodPost, "/api/deployments", createBody("first"))
	wantStatus(t, r, http.StatusCreated)
	if !h.stateExists() {
		t.Fatal("no state file after the first create")
	}
	st, err := cloudapi.LoadState(h.state)
	if err != nil || st.OrgSlug != fakeOrg || st.ProjectSlug != fakeProject {
		t.Fatalf("state %+v, %v", st, err)
	}
	want := []string{"POST /v1/auth/anonymous/scope", "POST /v1/orgs/anon-org/projects/default/deployments"}
	if got := h.cloud.callList(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("calls %v, want %v", got, want)
	}
	// Now the list asks upstream and shows it.
	var list deploymentsBody
	h.api(http.MethodGet, "/api/deployments", nil).decode(t, &list)
	if len(list.Deployments) != 1 || list.Deployments[0].Slug != "first" {
		t.Fatalf("list %+v", list)
	}
}

// No credentials at all: the first create mints an anonymous token, then creates the scope.
func TestFirstCreateMintsAnonymousCredentials(t *testing.T) {
	h := newHarness(t)
	r := h.api(http.MethodPost, "/api/deployments", createBody("minted"))
	wantStatus(t, r, http.StatusCreated)
	c, err := cloudapi.LoadCredentials(h.creds)
	if err != nil || c.Kind != cloudapi.KindAnonymous || c.Token != fakeToken {
		t.Fatalf("credentials %+v, %v", c, err)
	}
	if got := h.cloud.callList(); len(got) != 3 || got[0] != "POST /v1/auth/anonymous" {
		t.Fatalf("calls %v", got)
	}
}

// Signed-in credentials without a state file: missing_state, naming the file and its fields, with
// nothing sent upstream and no state file written.
func TestSignedInWithoutStateIsMissingState(t *testing.T) {
	h := newHarness(t)
	h.writeCreds(cloudapi.KindOAuth)
	r := h.api(http.MethodPost, "/api/deployments", createBody("nope"))
	wantStatus(t, r, http.StatusBadRequest)
	e := r.envelope(t)
	if e.Code != cloudapi.CodeMissingState {
		t.Fatalf("code %q", e.Code)
	}
	for _, want := range []string{h.state, "orgSlug", "projectSlug", "projectId"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q lacks %q", e.Message, want)
		}
	}
	// The same from the form: the message shows in it and it stays open.
	form := url.Values{"slug": {"nope"}, "kind": {"base_model"}, "model": {"demo-echo"}, "authMode": {"fixed_api_key"}}
	fr := h.api(http.MethodPost, "/api/deployments", form.Encode(), asHTMX, asForm)
	wantStatus(t, fr, http.StatusBadRequest)
	if !strings.Contains(fr.body, `id="create-form"`) || !strings.Contains(fr.body, "projectSlug") {
		t.Errorf("form fragment: %s", fr.body)
	}
	// Detail, update, keys: missing_state too.
	wantStatus(t, h.api(http.MethodGet, "/api/deployments/dep-1", nil), http.StatusBadRequest)
	if n := h.cloud.callCount(); n != 0 {
		t.Fatalf("%d upstream calls: %v", n, h.cloud.callList())
	}
	if h.stateExists() {
		t.Fatal("state file written for signed-in credentials")
	}
}

// Calls on existing endpoints without a state file do not create a scope just to find nothing.
func TestDetailWithoutStateIsNotFoundWithoutUpstreamCall(t *testing.T) {
	h := newHarness(t)
	h.writeCreds(cloudapi.KindAnonymous)
	r := h.api(http.MethodGet, "/api/deployments/dep-1", nil)
	wantStatus(t, r, http.StatusNotFound)
	if e := r.envelope(t); e.Code != "not_found" {
		t.Errorf("code %q", e.Code)
	}
	if n := h.cloud.callCount(); n != 0 || h.stateExists() {
		t.Fatalf("%d upstream calls, state written: %v", n, h.stateExists())
	}
}

func TestCredentialsRoute(t *testing.T) {
	h := newHarness(t)
	var got credentialsBody
	r := h.do(http.MethodGet, "/api/credentials", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &got)
	if got.Present || got.State != nil || h.cloud.callCount() != 0 {
		t.Fatalf("GET minted or invented state: %+v, calls %v", got, h.cloud.callList())
	}
	r = h.api(http.MethodPost, "/api/credentials", nil)
	wantStatus(t, r, http.StatusOK)
	r.decode(t, &got)
	if !got.Present || got.Kind != cloudapi.KindAnonymous {
		t.Fatalf("POST did not mint: %+v", got)
	}
	if strings.Contains(r.body, fakeToken) {
		t.Fatal("the token reached the browser")
	}
	// A second POST keeps the file: one mint only.
	h.api(http.MethodPost, "/api/credentials", nil)
	if calls := h.cloud.callList(); len(calls) != 1 || calls[0] != "POST /v1/auth/anonymous" {
		t.Fatalf("calls %v", calls)
	}
	h.writeState()
	frag := h.do(http.MethodGet, "/api/credentials", nil, asHTMX)
	if !strings.Contains(frag.body, "Anonymous") || !strings.Contains(frag.body, fakeOrg+"/"+fakeProject) {
		t.Errorf("badge %s", frag.body)
	}
}

// No state change on GET: with no credentials file, the pickers' reads (GET /api/models, /api/jobs)
// and the list and detail of a project whose credentials are gone mint nothing, write no file and
// call nothing upstream; the model picker says how to get credentials. POST /api/credentials (with
// the token) is the one way the page mints.
func TestGetsNeverMintCredentials(t *testing.T) {
	h := newHarness(t)
	r := h.do(http.MethodGet, "/api/models", nil)
	wantStatus(t, r, http.StatusUnauthorized)
	if e := r.envelope(t); e.Code != "no_credentials" || !strings.Contains(e.Message, "POST /api/credentials") {
		t.Errorf("envelope %+v", e)
	}
	f := h.do(http.MethodGet, "/api/models", nil, asHTMX, withHeader(hxTarget, "create-model"))
	wantStatus(t, f, http.StatusUnauthorized)
	if !strings.Contains(f.body, `<option value="" data-testid="picker-error">The studio has no credentials`) {
		t.Errorf("picker: %s", f.body)
	}
	wantStatus(t, h.do(http.MethodGet, "/api/jobs", nil), http.StatusOK)
	h.writeState() // a project whose credentials were deleted
	for _, p := range []string{"/api/jobs", "/api/deployments", "/api/deployments/dep-1"} {
		wantStatus(t, h.api(http.MethodGet, p, nil), http.StatusUnauthorized)
	}
	// The list's error view offers the create form its message names, besides Retry.
	lv := h.api(http.MethodGet, "/api/deployments", nil, asHTMX, withHeader(hxTarget, "main"))
	wantStatus(t, lv, http.StatusUnauthorized)
	if !strings.Contains(lv.body, `data-open-dialog="create-dialog" data-testid="error-create"`) || !strings.Contains(lv.body, `data-testid="retry"`) {
		t.Errorf("list error view offers no create form: %s", lv.body)
	}
	if _, err := os.Stat(h.creds); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a GET wrote the credentials file: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(h.creds)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a GET created the credentials folder: %v", err)
	}
	if n := h.cloud.callCount(); n != 0 {
		t.Fatalf("GETs called the cloud: %v", h.cloud.callList())
	}

	// The form's way: mint with POST, then the picker reads the catalog.
	wantStatus(t, h.api(http.MethodPost, "/api/credentials", nil), http.StatusOK)
	r = h.do(http.MethodGet, "/api/models", nil, asHTMX, withHeader(hxTarget, "create-model"))
	wantStatus(t, r, http.StatusOK)
	if !strings.Contains(r.body, `value="demo-echo"`) {
		t.Errorf("models after the mint: %s", r.body)
	}
}
