package oauth_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/server"
)

const password = "correct horse battery"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startServer runs the real `svc server` on loopback over a fresh data folder.
func startServer(t *testing.T) *server.Server {
	t.Helper()
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// callback stands in for the CLI's loopback listener: it records every answer the browser brings.
type callback struct {
	srv     *httptest.Server
	mu      sync.Mutex
	answers []url.Values
}

func newCallback(t *testing.T) *callback {
	cb := &callback{}
	cb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cb.mu.Lock()
		cb.answers = append(cb.answers, r.URL.Query())
		cb.mu.Unlock()
		io.WriteString(w, "back in the CLI")
	}))
	t.Cleanup(cb.srv.Close)
	return cb
}

func (cb *callback) redirectURI() string { return cb.srv.URL + "/callback" }

func (cb *callback) received() []url.Values {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return append([]url.Values(nil), cb.answers...)
}

// flow is one authorization request as the CLI builds it.
type flow struct {
	base, redirectURI, verifier, challenge, state string
}

func newFlow(base, redirectURI string) *flow {
	raw := make([]byte, 32)
	rand.Read(raw)
	verifier := base64.RawURLEncoding.EncodeToString(raw)
	sum := sha256.Sum256([]byte(verifier))
	return &flow{base: base, redirectURI: redirectURI, verifier: verifier,
		challenge: base64.RawURLEncoding.EncodeToString(sum[:]), state: "st-" + verifier[len(verifier)-8:]}
}

func (f *flow) params() url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {cloudapi.CLIClientID}, "redirect_uri": {f.redirectURI},
		"code_challenge": {f.challenge}, "code_challenge_method": {"S256"}, "state": {f.state}}
}

func (f *flow) authorizeURL() string { return f.base + "/oauth/authorize?" + f.params().Encode() }

// browser is a Go client with a cookie jar playing the user's browser.
type browser struct {
	t  *testing.T
	hc *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	// Generous: a sign-in runs bcrypt, which under -race on a busy two-core machine takes seconds.
	return &browser{t: t, hc: &http.Client{Jar: jar, Timeout: 60 * time.Second}}
}

// noFollow returns a client sharing the jar that stops at the first redirect.
func (b *browser) noFollow() *http.Client {
	return &http.Client{Jar: b.hc.Jar, Timeout: b.hc.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (b *browser) get(u string) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.hc.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (b *browser) post(hc *http.Client, u string, form url.Values) (*http.Response, string) {
	b.t.Helper()
	resp, err := hc.PostForm(u, form)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([^"]+)"`)

// scrapeCSRF reads the CSRF token from the sign-in form, as a browser submitting it would send it.
func scrapeCSRF(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf_token in the page:\n%s", page)
	}
	return m[1]
}

// signIn opens the sign-in page of f, submits email and password, and returns the final response
// (after following the redirect, if any) with its body.
func (b *browser) signIn(f *flow, email, pw string) (*http.Response, string) {
	b.t.Helper()
	resp, page := b.get(f.authorizeURL())
	if resp.StatusCode != http.StatusOK {
		b.t.Fatalf("GET authorize: %d\n%s", resp.StatusCode, page)
	}
	form := f.params()
	form.Set("csrf_token", scrapeCSRF(b.t, page))
	form.Set("email", email)
	form.Set("password", pw)
	return b.post(b.hc, f.base+"/oauth/authorize", form)
}

// code runs a successful sign-in of f and returns the code the callback received.
func (b *browser) code(f *flow, cb *callback, email, pw string) string {
	b.t.Helper()
	before := len(cb.received())
	resp, body := b.signIn(f, email, pw)
	got := cb.received()
	if resp.StatusCode != http.StatusOK || len(got) != before+1 {
		b.t.Fatalf("sign-in did not reach the callback: %d\n%s", resp.StatusCode, body)
	}
	q := got[len(got)-1]
	if q.Get("state") != f.state || q.Get("code") == "" {
		b.t.Fatalf("callback query = %v, want a code and state %q", q, f.state)
	}
	return q.Get("code")
}

// postToken calls the token endpoint raw, to see the RFC 6749 shapes themselves.
func postToken(t *testing.T, base string, form url.Values) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.PostForm(base+"/oauth/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("token endpoint answered %d with non-JSON: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, body, resp.Header
}

func exchangeForm(f *flow, code string) url.Values {
	return url.Values{"grant_type": {"authorization_code"}, "client_id": {cloudapi.CLIClientID}, "code": {code},
		"redirect_uri": {f.redirectURI}, "code_verifier": {f.verifier}}
}

func wantInvalidGrant(t *testing.T, what string, status int, body map[string]any) {
	t.Helper()
	if status != http.StatusBadRequest || body["error"] != "invalid_grant" || body["error_description"] == "" {
		t.Fatalf("%s: got %d %v, want 400 invalid_grant with a description", what, status, body)
	}
	if _, leaked := body["access_token"]; leaked {
		t.Fatalf("%s: an access token came with the error", what)
	}
}
