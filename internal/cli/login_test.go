package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/server"
)

// syncBuffer is a stdout that the test reads while the command is still writing to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var authorizeURLPattern = regexp.MustCompile(`http://\S+/oauth/authorize\?\S+`)

// TestLoginUseAndCreateAsSignedInUser is the sign-in journey (docs/ARCHITECTURE.md, "Sign-in") from
// the command line:
// an account added on the server host, `svc login` through the browser (played by an http.Client),
// an org and a project, `svc use`, and a deployment created as that user.
func TestLoginUseAndCreateAsSignedInUser(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(t.TempDir())

	// The account is added with the CLI, as on a server host, before the server starts.
	var out bytes.Buffer
	if _, err := Run(context.Background(), "users", []string{"add", "ann@example.com", "--data", dataDir, "--password-stdin"},
		strings.NewReader("correct horse battery\n"), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: dataDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	stdout := loginThroughBrowser(t, srv.BaseURL, "ann@example.com", "correct horse battery")
	if !strings.Contains(stdout.String(), "Signed in to "+srv.BaseURL+" as ann@example.com") {
		t.Fatalf("svc login output:\n%s", stdout.String())
	}

	credPath := filepath.Join(home, ".svc", "credentials.json")
	creds, err := cloudapi.LoadCredentials(credPath)
	if err != nil {
		t.Fatal(err)
	}
	if creds.Kind != cloudapi.KindOAuth || creds.RefreshToken == "" || creds.ExpiresAt == nil || time.Until(*creds.ExpiresAt) < 50*time.Minute {
		t.Fatalf("credentials = %+v", creds)
	}
	if info, _ := os.Stat(credPath); info.Mode().Perm() != 0o600 {
		t.Fatalf("credentials mode %v, want 0600", info.Mode().Perm())
	}

	// Without a state file a signed-in user is told how to pick a project.
	if _, _, _, err := runForTest(t, "deployments", "create", "--api", srv.BaseURL, "--slug", "anns-model", "--target", "base:sim-llama-3.1-8b-instruct"); err == nil || !strings.Contains(err.Error(), "svc use") {
		t.Fatalf("create without state: %v, want missing_state naming svc use", err)
	}

	for _, args := range [][]string{
		{"orgs", "create", "acme", "--api", srv.BaseURL},
		{"projects", "create", "--org", "acme", "web", "--api", srv.BaseURL},
		{"use", "--org", "acme", "--project", "web", "--api", srv.BaseURL},
	} {
		if out, _, _, err := runForTest(t, args...); err != nil {
			t.Fatalf("%q: %v\n%s", args, err, out)
		}
	}
	state, err := cloudapi.LoadState(".svc/state.json")
	if err != nil {
		t.Fatal(err)
	}
	me, err := cloudapi.New(srv.BaseURL, creds.Token).Me(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if state.OrgSlug != "acme" || state.ProjectSlug != "web" || state.ProjectID != me.Orgs[0].Projects[0].ID {
		t.Fatalf("state.json = %+v, projects of ann = %+v", state, me.Orgs)
	}
	if _, _, _, err := runForTest(t, "use", "--org", "acme", "--project", "nope", "--api", srv.BaseURL); err == nil || !strings.Contains(err.Error(), "acme/web") {
		t.Fatalf("use of a missing project: %v, want an error listing acme/web", err)
	}

	out2, _, _, err := runForTest(t, "deployments", "create", "--api", srv.BaseURL, "--slug", "anns-model",
		"--target", "base:sim-llama-3.1-8b-instruct", "--json")
	if err != nil {
		t.Fatalf("create as the signed-in user: %v", err)
	}
	var d cloudapi.Deployment
	if err := json.Unmarshal([]byte(out2), &d); err != nil || d.ProjectID != state.ProjectID {
		t.Fatalf("created %+v (%v), want it in project %s", d, err, state.ProjectID)
	}
	list, err := cloudapi.New(srv.BaseURL, creds.Token).WithProject("acme", "web").ListDeployments(context.Background())
	if err != nil || len(list) != 1 || list[0].Slug != "anns-model" {
		t.Fatalf("acme/web holds %+v (%v)", list, err)
	}
}

// loginThroughBrowser runs `svc login` against base and plays the browser: it reads the URL the
// command prints, signs in there, and waits for the command to finish. It returns what it printed.
func loginThroughBrowser(t *testing.T, base, email, password string) *syncBuffer {
	t.Helper()
	// svc login waits for the browser; the test reads the URL it prints and plays the browser.
	stdout := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), "login", []string{"--api", base, "--no-browser", "--timeout", "30s"}, strings.NewReader(""), stdout, io.Discard)
		done <- err
	}()
	var authURL string
	for deadline := time.Now().Add(10 * time.Second); authURL == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		authURL = authorizeURLPattern.FindString(stdout.String())
	}
	if authURL == "" {
		t.Fatalf("svc login printed no authorize URL:\n%s", stdout.String())
	}
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 60 * time.Second} // bcrypt under -race can take seconds
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	form := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`).FindAllStringSubmatch(string(page), -1) {
		form.Set(m[1], unescapeHTML(m[2]))
	}
	form.Set("email", email)
	form.Set("password", password)
	resp, err = browser.PostForm(base+"/oauth/authorize", form)
	if err != nil {
		t.Fatal(err)
	}
	landing, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(landing), "Signed in") {
		t.Fatalf("the browser did not land on the CLI's success page: %d\n%s", resp.StatusCode, landing)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("svc login: %v\n%s", err, stdout.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("svc login did not finish after the browser came back")
	}
	return stdout
}

// unescapeHTML undoes templ's attribute escaping of the few characters a form value can hold here.
func unescapeHTML(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">", "&#43;", "+").Replace(s)
}

func TestLoginRefreshesExpiredCredentials(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: dataDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	if _, err := srv.Service.CreateUser(ctx, "ann@example.com", "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	id, err := srv.Service.CheckPassword(ctx, "ann@example.com", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := srv.Service.IssueTokenPair(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// Saved credentials whose access token is about to expire.
	soon := time.Now().Add(20 * time.Second)
	path := filepath.Join(t.TempDir(), "credentials.json")
	old := &cloudapi.Credentials{APIBaseURL: srv.BaseURL, Kind: cloudapi.KindOAuth, Token: pair.AccessToken, RefreshToken: pair.RefreshToken, ExpiresAt: &soon}
	if err := cloudapi.SaveCredentials(path, old); err != nil {
		t.Fatal(err)
	}
	l := &cloudapi.Local{APIBaseURL: srv.BaseURL, CredentialsPath: path, StatePath: filepath.Join(t.TempDir(), "state.json")}
	cl, err := l.Client(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if me, err := cl.Me(ctx); err != nil || me.Identity.Email != "ann@example.com" {
		t.Fatalf("refreshed client: %v", err)
	}
	saved, err := cloudapi.LoadCredentials(path)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Token == old.Token || saved.RefreshToken == old.RefreshToken || time.Until(*saved.ExpiresAt) < 50*time.Minute {
		t.Fatalf("the refreshed credentials were not saved: %+v", saved)
	}
	// The refresh rotated the refresh token: the old one is spent.
	if _, err := cloudapi.RefreshToken(ctx, srv.BaseURL, old.RefreshToken); err == nil {
		t.Fatal("the old refresh token still works")
	}
	// Credentials that cannot be refreshed any more ask for a new sign-in.
	past := time.Now().Add(-time.Hour)
	if err := cloudapi.SaveCredentials(path, &cloudapi.Credentials{APIBaseURL: srv.BaseURL, Kind: cloudapi.KindOAuth, Token: "x", RefreshToken: old.RefreshToken, ExpiresAt: &past}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client(ctx, false); err == nil || !strings.Contains(err.Error(), "svc login") {
		t.Fatalf("unrefreshable credentials: %v, want a hint to sign in again", err)
	}
}

func TestUsersAdd(t *testing.T) {
	dataDir := t.TempDir()
	add := func(email, pw string) (string, error) {
		var out bytes.Buffer
		_, err := Run(context.Background(), "users", []string{"add", "--data", dataDir, email, "--password-stdin"}, strings.NewReader(pw+"\n"), &out, io.Discard)
		return out.String(), err
	}
	if out, err := add("ann@example.com", "correct horse battery"); err != nil || !strings.Contains(out, "Added user ann@example.com") {
		t.Fatalf("add: %v\n%s", err, out)
	}
	if _, err := add("ANN@example.com", "another long password"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("taken email: %v", err)
	}
	if _, err := add("bob@example.com", "short"); err == nil || !strings.Contains(err.Error(), "at least 10") {
		t.Fatalf("short password: %v", err)
	}
	if _, err := add("not-an-email", "correct horse battery"); err == nil {
		t.Fatal("a non-email was accepted")
	}
	// Without --password-stdin and without a terminal, it says what to do instead of hanging.
	_, err := Run(context.Background(), "users", []string{"add", "bob@example.com", "--data", dataDir}, strings.NewReader("pw\n"), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--password-stdin") {
		t.Fatalf("no terminal: %v", err)
	}
}

// TestLoginKeepsWhatWasMadeAnonymously: `svc login` run while anonymous credentials exist claims the
// anonymous identity, so the endpoints made before signing in are the user's and stop expiring.
func TestLoginKeepsWhatWasMadeAnonymously(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	if _, err := Run(context.Background(), "users", []string{"add", "ann@example.com", "--data", dataDir, "--password-stdin"},
		strings.NewReader("correct horse battery\n"), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: dataDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()

	if out, _, _, err := runForTest(t, "login", "--anonymous", "--api", srv.BaseURL); err != nil {
		t.Fatalf("svc login --anonymous: %v\n%s", err, out)
	}
	home, _ := os.UserHomeDir()
	anonCreds, err := cloudapi.LoadCredentials(filepath.Join(home, ".svc", "credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	anon := cloudapi.New(srv.BaseURL, anonCreds.Token)
	scope, err := anon.AnonymousScope(ctx)
	if err != nil {
		t.Fatal(err)
	}
	made, err := anon.WithProject(scope.OrgSlug, scope.ProjectSlug).CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
		Slug: "made-before", Target: cloudapi.Target{Kind: "base_model", Model: "sim-llama-3.1-8b-instruct"}})
	if err != nil || made.ExpiresAt == nil {
		t.Fatalf("anonymous create: %+v %v", made, err)
	}

	stdout := loginThroughBrowser(t, srv.BaseURL, "ann@example.com", "correct horse battery")
	if !strings.Contains(stdout.String(), "Kept what you made anonymously: org "+scope.OrgSlug) {
		t.Fatalf("svc login output:\n%s", stdout.String())
	}
	creds, err := cloudapi.LoadCredentials(filepath.Join(home, ".svc", "credentials.json"))
	if err != nil || creds.Kind != cloudapi.KindOAuth {
		t.Fatalf("credentials after login: %+v %v", creds, err)
	}
	kept, err := cloudapi.New(srv.BaseURL, creds.Token).WithProject(scope.OrgSlug, scope.ProjectSlug).GetDeployment(ctx, made.ID)
	if err != nil || kept.ExpiresAt != nil {
		t.Fatalf("the endpoint made anonymously, seen by ann: %+v %v", kept, err)
	}
	if _, err := anon.Me(ctx); err == nil {
		t.Fatal("the claimed anonymous token still works")
	}
}
