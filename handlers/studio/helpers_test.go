package studio

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// harness is a studio served on a real loopback listener in front of a fake cloud.
type harness struct {
	t      *testing.T
	cloud  *fakeCloud
	studio *Server
	url    string // http://127.0.0.1:<port>
	host   string // 127.0.0.1:<port>
	creds  string
	state  string
}

func newHarness(t *testing.T, tune ...func(*Options)) *harness {
	t.Helper()
	cloud := newFakeCloud(t)
	dir := t.TempDir()
	h := &harness{
		t:     t,
		cloud: cloud,
		creds: filepath.Join(dir, "home", ".svc", "credentials.json"),
		state: cloudapi.StatePath(filepath.Join(dir, "project")),
	}
	o := Options{APIBaseURL: cloud.srv.URL, CredentialsPath: h.creds, StatePath: h.state}
	for _, f := range tune {
		f(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	h.studio = s
	h.host = l.Addr().String()
	h.url = "http://" + h.host
	return h
}

func (h *harness) writeCreds(kind string) {
	h.t.Helper()
	if err := cloudapi.SaveCredentials(h.creds, &cloudapi.Credentials{APIBaseURL: h.cloud.srv.URL, Kind: kind, Token: fakeToken}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) writeState() {
	h.t.Helper()
	if err := cloudapi.SaveState(h.state, &cloudapi.Scope{OrgSlug: fakeOrg, ProjectSlug: fakeProject, ProjectID: "proj-1"}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) stateExists() bool {
	_, err := os.Stat(h.state)
	return err == nil
}

// response is what a test looks at.
type response struct {
	status int
	header http.Header
	body   string
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.body), v); err != nil {
		t.Fatalf("decode %q: %v", r.body, err)
	}
}

// envelope decodes the error envelope and checks its status matches the HTTP one.
func (r response) envelope(t *testing.T) cloudapi.ErrorBody {
	t.Helper()
	var env struct {
		Error *cloudapi.ErrorBody `json:"error"`
	}
	r.decode(t, &env)
	if env.Error == nil {
		t.Fatalf("no error envelope in %q", r.body)
	}
	if env.Error.Status != r.status {
		t.Errorf("envelope status %d, HTTP %d", env.Error.Status, r.status)
	}
	return *env.Error
}

// reqOpt adjusts a request.
type reqOpt func(*http.Request)

func withCSRF(token string) reqOpt {
	return func(r *http.Request) { r.Header.Set(csrfHeader, token) }
}

func asHTMX(r *http.Request) { r.Header.Set(hxRequest, "true") }

func withHost(host string) reqOpt {
	return func(r *http.Request) { r.Host = host }
}

func withHeader(name, value string) reqOpt {
	return func(r *http.Request) { r.Header.Set(name, value) }
}

func asForm(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }

// do sends a request; a non-nil body that is not a string is sent as JSON.
func (h *harness) do(method, path string, body any, opts ...reqOpt) response {
	h.t.Helper()
	var rd io.Reader
	isJSON := false
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = strings.NewReader(string(raw))
		isJSON = true
	}
	req, err := http.NewRequest(method, h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if isJSON {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(raw)}
}

// api sends a request with the CSRF token, as the page does.
func (h *harness) api(method, path string, body any, opts ...reqOpt) response {
	h.t.Helper()
	return h.do(method, path, body, append([]reqOpt{withCSRF(h.studio.CSRFToken())}, opts...)...)
}

// wantStatus checks the status of an answer. An htmx request's error arrives with HTTP 200 and its
// status in Svc-Status (renderHTML), which is then the one compared.
func wantStatus(t *testing.T, r response, want int) {
	t.Helper()
	got := r.status
	if s := r.header.Get(svcStatus); s != "" {
		if r.status != http.StatusOK {
			t.Fatalf("HTTP %d with %s: %s; an htmx error is answered 200", r.status, svcStatus, s)
		}
		got, _ = strconv.Atoi(s)
	}
	if got != want {
		t.Fatalf("status %d, want %d; body: %s", got, want, r.body)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
