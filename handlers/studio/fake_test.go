package studio

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// fakeCloud is a small in-memory management API that speaks the real envelope and counts every
// request, so tests can assert when the studio must not call upstream.
type fakeCloud struct {
	t   *testing.T
	srv *httptest.Server

	mu          sync.Mutex
	calls       []string // "METHOD /path", in order
	deployments map[string]*cloudapi.Deployment
	order       []string
	keys        map[string][]*cloudapi.Key
	runs        map[string][]cloudapi.RunSummary // newest first
	jobs        []cloudapi.Job
	lastAuth    string // Authorization header of the last edge call
	failList    bool   // the deployment list answers 500
	seq         int
}

const (
	fakeOrg     = "anon-org"
	fakeProject = "default"
	fakeToken   = "anon-token-123"
)

func newFakeCloud(t *testing.T) *fakeCloud {
	t.Helper()
	f := &fakeCloud{t: t, deployments: map[string]*cloudapi.Deployment{}, keys: map[string][]*cloudapi.Key{}, runs: map[string][]cloudapi.RunSummary{}}
	mux := http.NewServeMux()
	p := "/v1/orgs/{org}/projects/{project}"
	mux.HandleFunc("POST /v1/auth/anonymous", func(w http.ResponseWriter, r *http.Request) {
		send(w, http.StatusCreated, cloudapi.AnonymousToken{Token: fakeToken, Identity: cloudapi.Identity{ID: "id-1", Kind: "anonymous"}})
	})
	mux.HandleFunc("POST /v1/auth/anonymous/scope", func(w http.ResponseWriter, r *http.Request) {
		send(w, http.StatusOK, cloudapi.Scope{OrgSlug: fakeOrg, ProjectSlug: fakeProject, ProjectID: "proj-1"})
	})
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		send(w, http.StatusOK, map[string]any{"models": []cloudapi.Model{{ID: "demo-echo", Public: true, Default: true, Runtime: "simulator", Simulated: true}}})
	})
	mux.HandleFunc("GET "+p+"/deployments", f.scoped(func(w http.ResponseWriter, r *http.Request) {
		if f.failList {
			sendError(w, http.StatusInternalServerError, "internal", "the database is away")
			return
		}
		list := []*cloudapi.Deployment{}
		for _, id := range f.order {
			if d, ok := f.deployments[id]; ok {
				list = append(list, d)
			}
		}
		send(w, http.StatusOK, map[string]any{"deployments": list})
	}))
	mux.HandleFunc("POST "+p+"/deployments", f.scoped(func(w http.ResponseWriter, r *http.Request) {
		var req cloudapi.CreateDeploymentRequest
		if json.NewDecoder(r.Body).Decode(&req) != nil {
			sendError(w, http.StatusBadRequest, "invalid_request", "bad JSON")
			return
		}
		if req.Slug == "www" {
			sendError(w, http.StatusBadRequest, "reserved_slug", `"www" is reserved`)
			return
		}
		for _, d := range f.deployments {
			if d.Slug == req.Slug {
				sendError(w, http.StatusConflict, "slug_taken", fmt.Sprintf("The slug %q is already taken; choose another.", req.Slug))
				return
			}
		}
		if req.AuthMode == "" {
			req.AuthMode = cloudapi.AuthFixedAPIKey
		}
		f.seq++
		d := &cloudapi.Deployment{
			ID: fmt.Sprintf("dep-%d", f.seq), Slug: req.Slug, URL: "http://" + req.Slug + ".localhost:8080",
			ProjectID: "proj-1", Target: req.Target, AuthMode: req.AuthMode, Enabled: true,
			RunRetentionMode: cloudapi.RetentionDays, RunRetentionDays: 7, CreatedAt: time.Now().UTC(),
		}
		f.deployments[d.ID] = d
		f.order = append(f.order, d.ID)
		send(w, http.StatusCreated, d)
	}))
	mux.HandleFunc("GET "+p+"/deployments/{id}", f.withDeployment(func(w http.ResponseWriter, r *http.Request, d *cloudapi.Deployment) {
		send(w, http.StatusOK, d)
	}))
	mux.HandleFunc("PATCH "+p+"/deployments/{id}", f.withDeployment(func(w http.ResponseWriter, r *http.Request, d *cloudapi.Deployment) {
		var req cloudapi.UpdateDeploymentRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Enabled != nil {
			d.Enabled = *req.Enabled
		}
		if req.AuthMode != nil {
			d.AuthMode = *req.AuthMode
		}
		send(w, http.StatusOK, d)
	}))
	mux.HandleFunc("DELETE "+p+"/deployments/{id}", f.withDeployment(func(w http.ResponseWriter, r *http.Request, d *cloudapi.Deployment) {
		delete(f.deployments, d.ID)
		w.WriteHeader(http.StatusNoContent)
	}))
	mux.HandleFunc("GET "+p+"/deployments/{id}/keys", f.withDeployment(func(w http.ResponseWriter, r *http.Request, d *cloudapi.Deployment) {
		ks := f.keys[d.ID]
		if ks == nil {
			ks = []*cloudapi.Key{}
		}
		send(w, http.StatusOK, map[string]any{"keys": ks})
	}))
	mux.HandleFunc("POST "+p+"/deployments/{id}/keys", f.withDeployment(func(w http.ResponseWriter, r *http.Request, d *cloudapi.Deployment) {
		var req struct{ Label string }
		_ = json.NewDecoder(r.Body).Decode(&req)
		if d.AuthMode != cloudapi.AuthFixedAPIKey {
			sendError(w, http.StatusConflict, "auth_mode", "keys need fixed_api_key mode")
			return
		}
		for _, k := range f.keys[d.ID] {
			if k.Enabled && k.Label == req.Label {
				sendError(w, http.StatusConflict, "label_taken", "An enabled key already has this label.")
				return
			}
		}
		f.seq++
		plain := fmt.Sprintf("sk-ep-secret%06d", f.seq)
		k := &cloudapi.Key{ID: fmt.Sprintf("key-%d", f.seq), Label: req.Label, Prefix: plain[:12], Enabled: true, CreatedAt: time.Now().UTC()}
		f.keys[d.ID] = append(f.keys[d.ID], k)
		send(w, http.StatusCreated, cloudapi.IssuedKey{Key: *k, Plaintext: plain})
	}))
	mux.HandleFunc("POST "+p+"/deployments/{id}/keys/{keyId}/revoke", f.withDeployment(func(w http.ResponseWriter, r *http.Request, d *cloudapi.Deployment) {
		for _, k := range f.keys[d.ID] {
			if k.ID == r.PathValue("keyId") {
				k.Enabled = false
				send(w, http.StatusOK, k)
				return
			}
		}
		sendError(w, http.StatusNotFound, "not_found", "no such key")
	}))
	// Runs, paged like the real API; the fake's cursor is the offset of the next page.
	mux.HandleFunc("GET "+p+"/deployments/{id}/runs", f.withDeployment(func(w http.ResponseWriter, r *http.Request, d *cloudapi.Deployment) {
		all := f.runs[d.ID]
		from, limit := 0, len(all)
		if c := r.URL.Query().Get("cursor"); c != "" {
			n, err := strconv.Atoi(c)
			if err != nil || n < 0 || n > len(all) {
				sendError(w, http.StatusBadRequest, "invalid_request", "cursor is not valid; pass the nextCursor of a previous page")
				return
			}
			from = n
		}
		if l := r.URL.Query().Get("limit"); l != "" {
			limit, _ = strconv.Atoi(l)
		}
		page := cloudapi.RunPage{Runs: all[from:min(from+limit, len(all))]}
		if from+limit < len(all) {
			page.NextCursor = strconv.Itoa(from + limit)
		}
		send(w, http.StatusOK, page)
	}))
	// One run with its bodies: the summary's, with a request and a response of its own.
	mux.HandleFunc("GET "+p+"/deployments/{id}/runs/{runId}", f.withDeployment(func(w http.ResponseWriter, r *http.Request, d *cloudapi.Deployment) {
		for _, rs := range f.runs[d.ID] {
			if rs.ID == r.PathValue("runId") {
				resp := json.RawMessage(`{"choices":[{"message":{"role":"assistant","content":"echo: hi"}}]}`)
				if rs.Status == "error" {
					resp = json.RawMessage(`{"error":{"message":"the key's rate limit is reached; retry after 7 seconds","type":"rate_limit_error","code":"rate_limit_exceeded","param":null}}`)
				}
				send(w, http.StatusOK, cloudapi.Run{RunSummary: rs,
					Request:  json.RawMessage(`{"messages":[{"role":"user","content":"hi from ` + rs.ID + `"}]}`),
					Response: resp})
				return
			}
		}
		sendError(w, http.StatusNotFound, "not_found", "no such run")
	}))
	mux.HandleFunc("GET "+p+"/jobs", f.scoped(func(w http.ResponseWriter, r *http.Request) {
		send(w, http.StatusOK, map[string]any{"jobs": f.jobs})
	}))
	mux.HandleFunc("GET "+p+"/jobs/{jobId}", f.scoped(func(w http.ResponseWriter, r *http.Request) {
		for _, j := range f.jobs {
			if j.ID == r.PathValue("jobId") {
				send(w, http.StatusOK, j)
				return
			}
		}
		sendError(w, http.StatusNotFound, "not_found", "no such job")
	}))
	// The edge in its path form: the studio's playground posts here.
	mux.HandleFunc("POST /e/{slug}/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		f.lastAuth = r.Header.Get("Authorization")
		if r.Header.Get("Authorization") != "Bearer good-key" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"Invalid API key.","type":"invalid_request_error","code":"invalid_api_key","param":null}}`))
			return
		}
		send(w, http.StatusOK, map[string]any{
			"model":   "demo-echo",
			"choices": []any{map[string]any{"index": 0, "message": map[string]string{"role": "assistant", "content": "echo: hi"}}},
		})
	})

	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.calls = append(f.calls, r.Method+" "+r.URL.Path)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// scoped checks the bearer token and the project, as the real API does.
func (f *fakeCloud) scoped(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			sendError(w, http.StatusUnauthorized, "unauthorized", "no token")
			return
		}
		if r.PathValue("org") != fakeOrg || r.PathValue("project") != fakeProject {
			sendError(w, http.StatusNotFound, "not_found", "no such project")
			return
		}
		h(w, r)
	}
}

func (f *fakeCloud) withDeployment(h func(http.ResponseWriter, *http.Request, *cloudapi.Deployment)) http.HandlerFunc {
	return f.scoped(func(w http.ResponseWriter, r *http.Request) {
		d, ok := f.deployments[r.PathValue("id")]
		if !ok {
			sendError(w, http.StatusNotFound, "not_found", "No endpoint with this id.")
			return
		}
		h(w, r, d)
	})
}

func (f *fakeCloud) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func (f *fakeCloud) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// add stores a deployment directly, as if created earlier.
func (f *fakeCloud) add(d cloudapi.Deployment) *cloudapi.Deployment {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	if d.ID == "" {
		d.ID = fmt.Sprintf("dep-%d", f.seq)
	}
	if d.URL == "" {
		d.URL = "http://" + d.Slug + ".localhost:8080"
	}
	if d.AuthMode == "" {
		d.AuthMode = cloudapi.AuthFixedAPIKey
	}
	if d.RunRetentionMode == "" {
		d.RunRetentionMode, d.RunRetentionDays = cloudapi.RetentionDays, 7
	}
	f.deployments[d.ID] = &d
	f.order = append(f.order, d.ID)
	return &d
}

func (f *fakeCloud) addKey(depID string, k cloudapi.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys[depID] = append(f.keys[depID], &k)
}

// addRuns stores recorded runs of a deployment, newest first.
func (f *fakeCloud) addRuns(depID string, runs ...cloudapi.RunSummary) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[depID] = append(f.runs[depID], runs...)
}

func send(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func sendError(w http.ResponseWriter, status int, code, msg string) {
	send(w, status, map[string]any{"error": cloudapi.ErrorBody{Status: status, Code: code, Message: msg}})
}
