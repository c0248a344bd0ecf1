package cloudapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fake is a management API stand-in that records what it was sent and answers from a table keyed by
// "METHOD escaped-path".
type fake struct {
	t      *testing.T
	mu     sync.Mutex
	seen   []seenRequest
	routes map[string]http.HandlerFunc
	srv    *httptest.Server
}

type seenRequest struct {
	Method, URI, Auth, Body string
}

func newFake(t *testing.T, routes map[string]http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{t: t, routes: routes}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body)) // handlers read it again
		f.mu.Lock()
		f.seen = append(f.seen, seenRequest{r.Method, r.RequestURI, r.Header.Get("Authorization"), string(body)})
		f.mu.Unlock()
		if h, ok := f.routes[r.Method+" "+r.URL.EscapedPath()]; ok {
			h(w, r)
			return
		}
		sendJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{
			"status": 404, "code": "not_found", "message": "no route " + r.Method + " " + r.URL.EscapedPath(),
		}})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) requests() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func sendJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func answer(status int, v any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { sendJSON(w, status, v) }
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *cloudapi.Error, got %T: %v", err, err)
	}
	return e
}

func TestErrorEnvelopeIsDecoded(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/orgs/acme/projects/web/deployments": answer(409, map[string]any{"error": map[string]any{
			"status": 409, "code": "slug_taken", "message": "the slug demo is taken",
		}}),
	})
	c := New(f.srv.URL+"/", "tok").WithProject("acme", "web")
	_, err := c.CreateDeployment(context.Background(), CreateDeploymentRequest{Slug: "demo", Target: Target{Kind: TargetMultiModel}})
	e := asError(t, err)
	if e.Status != 409 || e.Code != "slug_taken" || e.Message != "the slug demo is taken" {
		t.Fatalf("got %+v", e)
	}
	if got, want := e.Error(), "the slug demo is taken (slug_taken, HTTP 409)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	reqs := f.requests()
	if len(reqs) != 1 || reqs[0].Auth != "Bearer tok" {
		t.Fatalf("requests = %+v", reqs)
	}
	var sent CreateDeploymentRequest
	if err := json.Unmarshal([]byte(reqs[0].Body), &sent); err != nil || sent.Slug != "demo" || sent.Target.Kind != TargetMultiModel {
		t.Fatalf("body sent = %s (%v)", reqs[0].Body, err)
	}
}

func TestErrorWithoutEnvelope(t *testing.T) {
	bigHTML := "<!DOCTYPE html><html><body>" + strings.Repeat("bad gateway ", 5000) + "</body></html>"
	longText := strings.Repeat("x", 5000)
	cases := []struct {
		name, contentType, body string
		status                  int
		wantCode                string
		wantIn, wantNotIn       string
	}{
		{"html proxy page", "text/html", bigHTML, 502, "http_502", "HTML page", "bad gateway bad gateway"},
		{"empty body", "", "", 503, "http_503", "empty body", ""},
		{"plain text", "text/plain", "upstream connect error\n", 500, "http_500", "upstream connect error", ""},
		{"long text is cut", "text/plain", longText, 500, "http_500", "…", strings.Repeat("x", 300)},
		{"json but not envelope", "application/json", `{"detail":"nope"}`, 404, "http_404", `{"detail":"nope"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, map[string]http.HandlerFunc{
				"GET /v1/models": func(w http.ResponseWriter, r *http.Request) {
					if tc.contentType != "" {
						w.Header().Set("Content-Type", tc.contentType)
					}
					w.WriteHeader(tc.status)
					io.WriteString(w, tc.body)
				},
			})
			_, err := New(f.srv.URL, "").ListModels(context.Background())
			e := asError(t, err)
			if e.Status != tc.status || e.Code != tc.wantCode {
				t.Fatalf("got status %d code %q, want %d %q", e.Status, e.Code, tc.status, tc.wantCode)
			}
			if !strings.Contains(e.Message, tc.wantIn) || !strings.Contains(e.Message, "GET /v1/models") {
				t.Fatalf("message %q lacks %q or the route", e.Message, tc.wantIn)
			}
			if tc.wantNotIn != "" && strings.Contains(e.Message, tc.wantNotIn) {
				t.Fatalf("message dumps the body: %q", e.Message)
			}
			if len(e.Message) > 400 {
				t.Fatalf("message is %d bytes long", len(e.Message))
			}
		})
	}
}

func TestTransportFailureIsNotAnAPIError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	_, err := New(url, "").ListModels(context.Background())
	var e *Error
	if err == nil || errors.As(err, &e) {
		t.Fatalf("want a plain transport error, got %T: %v", err, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New(url, "").ListModels(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: want context.Canceled, got %v", err)
	}
}

func TestProjectCallsWithoutScopeMakeNoRequest(t *testing.T) {
	f := newFake(t, nil)
	ctx := context.Background()
	for _, c := range []*Client{New(f.srv.URL, "tok"), New(f.srv.URL, "tok").WithProject("acme", "")} {
		calls := map[string]func() error{
			"ListDeployments":  func() error { _, err := c.ListDeployments(ctx); return err },
			"DeleteDeployment": func() error { return c.DeleteDeployment(ctx, "d1") },
			"RetargetDeployment": func() error {
				_, err := c.RetargetDeployment(ctx, "d1", "multi")
				return err
			},
			"IssueDeploymentKey": func() error { _, err := c.IssueDeploymentKey(ctx, "d1", "ci"); return err },
			"ListRuns":           func() error { _, err := c.ListRuns(ctx, "d1", ListRunsOptions{}); return err },
			"ListJobs":           func() error { _, err := c.ListJobs(ctx); return err },
		}
		for name, call := range calls {
			e := asError(t, call())
			if e.Status != 400 || e.Code != CodeMissingState || !strings.Contains(e.Message, ".svc/state.json") {
				t.Fatalf("%s: got %+v", name, e)
			}
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("the fake saw %d requests, want none", n)
	}
}

func TestPathSegmentsAreEscaped(t *testing.T) {
	f := newFake(t, map[string]http.HandlerFunc{
		"POST /v1/orgs/my%20org/projects/a%2Fb/deployments/d%3F1/keys/k%231/revoke": answer(200, Key{ID: "k#1", Label: "ci"}),
	})
	k, err := New(f.srv.URL, "tok").WithProject("my org", "a/b").RevokeDeploymentKey(context.Background(), "d?1", "k#1")
	if err != nil {
		t.Fatalf("revoke: %v (requests %+v)", err, f.requests())
	}
	if k.ID != "k#1" {
		t.Fatalf("key = %+v", k)
	}
}

func TestWithProjectLeavesOriginalUnscoped(t *testing.T) {
	c := New("http://x", "tok")
	s := c.WithProject("o", "p")
	if c.OrgSlug != "" || s.OrgSlug != "o" || s.ProjectSlug != "p" || s.Token != "tok" {
		t.Fatalf("c=%+v s=%+v", c, s)
	}
}

func TestListResponsesAreUnwrapped(t *testing.T) {
	const p = "/v1/orgs/o/projects/p"
	f := newFake(t, map[string]http.HandlerFunc{
		"GET " + p + "/deployments":         answer(200, map[string]any{"deployments": []Deployment{{ID: "d1", Slug: "one"}}}),
		"GET " + p + "/deployments/d1/keys": answer(200, map[string]any{"keys": []map[string]any{{"id": "k1", "lastUsedAt": "2025-01-02T03:04:05Z"}}}),
		"GET " + p + "/deployments/d1/runs": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("limit") != "2" || r.URL.Query().Get("cursor") != "abc" {
				sendJSON(w, 400, map[string]any{"error": map[string]any{"status": 400, "code": "invalid_request", "message": "bad query " + r.URL.RawQuery}})
				return
			}
			sendJSON(w, 200, map[string]any{"runs": []RunSummary{{ID: "r1"}}, "nextCursor": "def"})
		},
		"POST " + p + "/deployments/bulk": answer(200, map[string]any{"results": []map[string]any{
			{"id": "d1", "ok": true}, {"id": "d2", "ok": false, "error": map[string]any{"status": 404, "code": "not_found", "message": "no such deployment"}},
		}}),
		"DELETE " + p + "/deployments/d1":    func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
		"POST " + p + "/deployments/d1/keys": answer(201, map[string]any{"key": map[string]any{"id": "k2", "label": "ci"}, "plaintext": "sk-ep-secret"}),
	})
	ctx := context.Background()
	c := New(f.srv.URL, "tok").WithProject("o", "p")

	ds, err := c.ListDeployments(ctx)
	if err != nil || len(ds) != 1 || ds[0].Slug != "one" {
		t.Fatalf("ListDeployments = %+v, %v", ds, err)
	}
	ks, err := c.ListDeploymentKeys(ctx, "d1")
	if err != nil || len(ks) != 1 || ks[0].LastUsedAt == nil || ks[0].LastUsedAt.Year() != 2025 {
		t.Fatalf("ListDeploymentKeys = %+v, %v", ks, err)
	}
	page, err := c.ListRuns(ctx, "d1", ListRunsOptions{Limit: 2, Cursor: "abc"})
	if err != nil || len(page.Runs) != 1 || page.NextCursor != "def" {
		t.Fatalf("ListRuns = %+v, %v", page, err)
	}
	rs, err := c.BulkDeployments(ctx, BulkRequest{IDs: []string{"d1", "d2"}, Action: BulkDisable})
	if err != nil || len(rs) != 2 || !rs[0].OK || rs[1].OK || rs[1].Error == nil || rs[1].Error.Code != "not_found" {
		t.Fatalf("BulkDeployments = %+v, %v", rs, err)
	}
	if err := c.DeleteDeployment(ctx, "d1"); err != nil {
		t.Fatalf("DeleteDeployment: %v", err)
	}
	ik, err := c.IssueDeploymentKey(ctx, "d1", "ci")
	if err != nil || ik.Plaintext != "sk-ep-secret" || ik.Key.ID != "k2" {
		t.Fatalf("IssueDeploymentKey = %+v, %v", ik, err)
	}
	if body := f.requests()[len(f.requests())-1].Body; !strings.Contains(body, `"label":"ci"`) {
		t.Fatalf("issue body = %s", body)
	}
}

func TestRetargetReadsCurrentJobThenPatches(t *testing.T) {
	const path = "/v1/orgs/o/projects/p/deployments/d1"
	var patched Target
	f := newFake(t, map[string]http.HandlerFunc{
		"GET " + path: answer(200, Deployment{ID: "d1", Target: Target{Kind: TargetFinalAdapter, JobID: "job-1"}}),
		"PATCH " + path: func(w http.ResponseWriter, r *http.Request) {
			var req map[string]json.RawMessage
			_ = json.NewDecoder(r.Body).Decode(&req)
			if len(req) != 1 || req["target"] == nil {
				sendJSON(w, 400, map[string]any{"error": map[string]any{"status": 400, "code": "invalid_request", "message": "want only target"}})
				return
			}
			_ = json.Unmarshal(req["target"], &patched)
			sendJSON(w, 200, Deployment{ID: "d1", Target: patched})
		},
	})
	d, err := New(f.srv.URL, "tok").WithProject("o", "p").RetargetDeployment(context.Background(), "d1", "checkpoint:300")
	if err != nil {
		t.Fatal(err)
	}
	want := Target{Kind: TargetCheckpoint, JobID: "job-1", Step: 300}
	if patched != want || d.Target != want {
		t.Fatalf("patched %+v, returned %+v, want %+v", patched, d.Target, want)
	}
}

func TestRetargetWithBadShorthandDoesNotPatch(t *testing.T) {
	const path = "/v1/orgs/o/projects/p/deployments/d1"
	f := newFake(t, map[string]http.HandlerFunc{
		"GET " + path: answer(200, Deployment{ID: "d1", Target: Target{Kind: TargetBaseModel, Model: "m"}}),
	})
	_, err := New(f.srv.URL, "tok").WithProject("o", "p").RetargetDeployment(context.Background(), "d1", "final")
	if e := asError(t, err); e.Code != "invalid_target" {
		t.Fatalf("got %+v", e)
	}
	for _, r := range f.requests() {
		if r.Method != http.MethodGet {
			t.Fatalf("unexpected %s %s", r.Method, r.URI)
		}
	}
}
