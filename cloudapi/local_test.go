package cloudapi

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// anonymousAPI fakes the two calls an anonymous first run makes.
func anonymousAPI(t *testing.T) *fake {
	return newFake(t, map[string]http.HandlerFunc{
		"POST /v1/auth/anonymous": answer(201, AnonymousToken{Token: "anon-1", Identity: Identity{ID: "i1", Kind: "anonymous"}}),
		"POST /v1/auth/anonymous/scope": func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer anon-1" {
				sendJSON(w, 401, map[string]any{"error": map[string]any{"status": 401, "code": "unauthorized", "message": "bad token"}})
				return
			}
			sendJSON(w, 200, Scope{OrgSlug: "anon-org", ProjectSlug: "default", ProjectID: "p1"})
		},
		"GET /v1/orgs/anon-org/projects/default/deployments": answer(200, map[string]any{"deployments": []Deployment{}}),
	})
}

func newLocal(t *testing.T, base string) *Local {
	dir := t.TempDir()
	return &Local{
		APIBaseURL:      base,
		CredentialsPath: filepath.Join(dir, "home", ".svc", "credentials.json"),
		StatePath:       StatePath(filepath.Join(dir, "project")),
	}
}

func TestCredentialsMintedWhenMissing(t *testing.T) {
	f := anonymousAPI(t)
	l := newLocal(t, f.srv.URL)
	ctx := context.Background()

	if _, err := l.Credentials(ctx, false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("mint=false on a missing file: want fs.ErrNotExist, got %v", err)
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("mint=false made %d requests", n)
	}

	c, err := l.Credentials(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.Token != "anon-1" || c.Kind != KindAnonymous || c.APIBaseURL != f.srv.URL {
		t.Fatalf("credentials = %+v", c)
	}
	info, err := os.Stat(l.CredentialsPath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file mode %v, want 0600", info.Mode().Perm())
	}
	dirInfo, _ := os.Stat(filepath.Dir(l.CredentialsPath))
	if dirInfo.Mode().Perm() != 0o700 {
		t.Fatalf("credentials folder mode %v, want 0700", dirInfo.Mode().Perm())
	}
	saved, err := LoadCredentials(l.CredentialsPath)
	if err != nil || *saved != *c {
		t.Fatalf("saved %+v, %v; want %+v", saved, err, c)
	}

	// A second call reuses the file instead of minting a new identity.
	if _, err := l.Credentials(ctx, true); err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d requests, want exactly one mint", n)
	}
	// No temp files are left next to it.
	entries, _ := os.ReadDir(filepath.Dir(l.CredentialsPath))
	if len(entries) != 1 {
		t.Fatalf("folder holds %d entries, want only credentials.json", len(entries))
	}
}

func TestCredentialsOfAnotherServerAreNotUsed(t *testing.T) {
	f := anonymousAPI(t)
	l := newLocal(t, f.srv.URL+"/")
	if err := SaveCredentials(l.CredentialsPath, &Credentials{APIBaseURL: "https://elsewhere.example", Kind: KindAnonymous, Token: "foreign"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Credentials(context.Background(), false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want fs.ErrNotExist for another server's token, got %v", err)
	}
	cl, err := l.Client(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Token != "anon-1" {
		t.Fatalf("token %q, want a fresh one from this server", cl.Token)
	}
}

func TestMalformedCredentialsNameTheFile(t *testing.T) {
	l := newLocal(t, "http://unused.invalid")
	os.MkdirAll(filepath.Dir(l.CredentialsPath), 0o700)
	os.WriteFile(l.CredentialsPath, []byte("{not json"), 0o600)
	_, err := l.Credentials(context.Background(), true)
	if err == nil || errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), l.CredentialsPath) {
		t.Fatalf("got %v", err)
	}
}

func TestScopedClientCreatesStateForAnonymous(t *testing.T) {
	f := anonymousAPI(t)
	l := newLocal(t, f.srv.URL)
	ctx := context.Background()
	if l.HasState() {
		t.Fatal("HasState before anything was written")
	}
	cl, err := l.ScopedClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cl.OrgSlug != "anon-org" || cl.ProjectSlug != "default" || cl.Token != "anon-1" {
		t.Fatalf("client = %+v", cl)
	}
	if !l.HasState() {
		t.Fatal("state file not written")
	}
	s, err := LoadState(l.StatePath)
	if err != nil || *s != (Scope{OrgSlug: "anon-org", ProjectSlug: "default", ProjectID: "p1"}) {
		t.Fatalf("state = %+v, %v", s, err)
	}
	if _, err := cl.ListDeployments(ctx); err != nil {
		t.Fatalf("scoped call: %v", err)
	}

	// With the state written, the next client asks the server for nothing.
	before := len(f.requests())
	if _, err := l.ScopedClient(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(f.requests()) - before; n != 0 {
		t.Fatalf("second ScopedClient made %d requests", n)
	}
}

func TestScopedClientMissingStateForOAuth(t *testing.T) {
	f := anonymousAPI(t)
	l := newLocal(t, f.srv.URL)
	if err := SaveCredentials(l.CredentialsPath, &Credentials{APIBaseURL: f.srv.URL, Kind: KindOAuth, Token: "user-1", RefreshToken: "r"}); err != nil {
		t.Fatal(err)
	}
	_, err := l.ScopedClient(context.Background())
	e := asError(t, err)
	if e.Status != 400 || e.Code != CodeMissingState {
		t.Fatalf("got %+v", e)
	}
	for _, want := range []string{l.StatePath, "orgSlug", "projectSlug", "projectId", "by hand"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q lacks %q", e.Message, want)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("the fake saw %d requests, want none", n)
	}
	if l.HasState() {
		t.Fatal("a state file was written for a signed-in user")
	}
}

func TestScopedClientUsesExistingStateAndRejectsIncompleteOne(t *testing.T) {
	f := anonymousAPI(t)
	l := newLocal(t, f.srv.URL)
	SaveCredentials(l.CredentialsPath, &Credentials{APIBaseURL: f.srv.URL, Kind: KindOAuth, Token: "user-1"})

	if err := SaveState(l.StatePath, &Scope{OrgSlug: "acme", ProjectSlug: "web", ProjectID: "p9"}); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(l.StatePath); info.Mode().Perm() != 0o644 {
		t.Fatalf("state mode %v, want 0644", info.Mode().Perm())
	}
	cl, err := l.ScopedClient(context.Background())
	if err != nil || cl.OrgSlug != "acme" || cl.ProjectSlug != "web" || cl.Token != "user-1" {
		t.Fatalf("client %+v, %v", cl, err)
	}

	os.WriteFile(l.StatePath, []byte(`{"orgSlug":"acme"}`), 0o644)
	_, err = l.ScopedClient(context.Background())
	e := asError(t, err)
	if e.Code != CodeMissingState || !strings.Contains(e.Message, "projectSlug, projectId") {
		t.Fatalf("got %+v", e)
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("the fake saw %d requests, want none", n)
	}
}

func TestLoadStateMissingFile(t *testing.T) {
	_, err := LoadState(filepath.Join(t.TempDir(), "nope", "state.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
}
