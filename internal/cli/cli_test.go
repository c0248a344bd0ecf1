package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/server"
)

func runForTest(t *testing.T, args ...string) (stdout, stderr string, handled bool, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	handled, err = Run(context.Background(), args[0], args[1:], strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), handled, err
}

func TestCLIParsesFlagsAfterPositionalArguments(t *testing.T) {
	c := &cli{}
	cmd := c.newCommand("svc keys issue DEPLOYMENT --label LABEL", "")
	label := cmd.String("label", "", "")
	pos, err := c.parse(cmd, []string{"dep-1", "--label", "ci bot", "--api", "http://x:1", "--json"}, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(pos) != 1 || pos[0] != "dep-1" || *label != "ci bot" || c.api != "http://x:1" || !c.asJSON {
		t.Fatalf("pos=%q label=%q api=%q json=%v", pos, *label, c.api, c.asJSON)
	}

	// After "--" an argument that looks like a flag is positional.
	cmd = c.newCommand("svc runs get DEPLOYMENT RUN", "")
	pos, err = c.parse(cmd, []string{"--", "-odd-id", "r1"}, 2, false)
	if err != nil || len(pos) != 2 || pos[0] != "-odd-id" {
		t.Fatalf("pos=%q err=%v", pos, err)
	}

	cmd = c.newCommand("svc keys revoke DEPLOYMENT KEY", "")
	if _, err := c.parse(cmd, []string{"dep-1"}, 2, false); err == nil {
		t.Fatal("a missing positional argument was accepted")
	}
	if _, err := c.parse(cmd, []string{"a", "b", "c"}, 2, false); err == nil {
		t.Fatal("an extra positional argument was accepted")
	}
}

func TestCLIHelpAndUsageErrors(t *testing.T) {
	if _, _, handled, _ := runForTest(t, "server"); handled {
		t.Fatal("Run claimed a command that is not the CLI's")
	}

	out, _, handled, err := runForTest(t, "deployments", "create", "--help")
	if !handled || err != nil {
		t.Fatalf("--help: handled=%v err=%v", handled, err)
	}
	for _, want := range []string{"svc deployments create", "-slug", "-target", "-retention", "-api", "-json"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}

	out, _, _, err = runForTest(t, "keys", "-h")
	if err != nil || !strings.Contains(out, "issue") || !strings.Contains(out, "revoke") {
		t.Fatalf("group help: err=%v\n%s", err, out)
	}

	// Mistakes are caught before any credentials are read or any request is sent: the API URL
	// points nowhere and HOME is empty.
	t.Setenv("HOME", t.TempDir())
	cases := [][]string{
		{"keys", "issue", "dep-1", "--api", "http://127.0.0.1:1"},                                 // no --label
		{"deployments", "create", "--slug", "demo", "--target", "final"},                          // no current job at creation
		{"deployments", "create", "--slug", "demo", "--target", "multi", "--retention", "days:0"}, // out of range
		{"deployments", "update", "dep-1"},                                                        // nothing to update
		{"deployments", "update", "dep-1", "--enable", "--disable"},
		{"jobs", "create", "--base-model", "m", "--checkpoint", "five=file:///x"},
		{"deployments", "frobnicate"},
		{"runs"},
	}
	for _, args := range cases {
		_, stderr, handled, err := runForTest(t, args...)
		if !handled || err == nil {
			t.Errorf("%q: handled=%v err=%v, want an error", args, handled, err)
		}
		if _, statErr := os.Stat(filepath.Join(os.Getenv("HOME"), ".svc")); statErr == nil {
			t.Fatalf("%q wrote ~/.svc", args)
		}
		// The error alone: no usage dumped before it (Report adds a one-line hint).
		if stderr != "" {
			t.Errorf("%q: Run printed on stderr:\n%s", args, stderr)
		}
		var ue *UsageError
		var ae *cloudapi.Error
		if !errors.As(err, &ae) && (!errors.As(err, &ue) || !strings.HasPrefix(ue.Help, "svc "+args[0])) {
			t.Errorf("%q: %v is not a usage error pointing at the command's --help", args, err)
		}
	}
}

// A mistake on the command line is reported as the error first, then one line saying where the usage
// is; --help still prints the whole usage, on stdout; all with the exit codes of old.
func TestCLIReportsMistakesBriefly(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deployments", "create", "--bogus"}, "error: flag provided but not defined: --bogus\nrun 'svc deployments create --help' for usage\n"},
		// The flag is quoted as typed: one dash, two dashes, with a value, after a positional argument.
		{[]string{"deployments", "create", "-bogus"}, "error: flag provided but not defined: -bogus\nrun 'svc deployments create --help' for usage\n"},
		{[]string{"keys", "issue", "dep", "--slugg=x"}, "error: flag provided but not defined: --slugg\nrun 'svc keys issue --help' for usage\n"},
		{[]string{"keys", "issue", "dep", "--label"}, "error: flag needs an argument: --label\nrun 'svc keys issue --help' for usage\n"},
		{[]string{"keys", "issue"}, "error: missing arguments: svc keys issue DEPLOYMENT --label LABEL\nrun 'svc keys issue --help' for usage\n"},
		{[]string{"deployments", "frobnicate"}, "error: unknown command \"svc deployments frobnicate\"; the commands are list | get | create | update | delete | bulk | canary\n" +
			"run 'svc deployments --help' for usage\n"},
		{[]string{"runs"}, "error: missing command: svc runs list | get | feedback | export\nrun 'svc runs --help' for usage\n"},
		{[]string{"login", "--nope"}, "error: flag provided but not defined: --nope\nrun 'svc login --help' for usage\n"},
	} {
		out, stderr, _, err := runForTest(t, c.args...)
		var report strings.Builder
		Report(&report, err)
		if ExitCode(err) != ExitUsage || out != "" || stderr != "" || report.String() != c.want {
			t.Errorf("svc %s: exit %d, stdout %q, stderr %q, report:\n%s\nwant:\n%s", strings.Join(c.args, " "), ExitCode(err), out, stderr, report.String(), c.want)
		}
	}
	out, _, _, err := runForTest(t, "deployments", "create", "--help")
	if ExitCode(err) != ExitOK || !strings.Contains(out, "Usage:\n  svc deployments create") || !strings.Contains(out, "-slug") {
		t.Errorf("--help: exit %d\n%s", ExitCode(err), out)
	}
}

// A server that does not answer is said so in a sentence naming it, not with Go's dial error; the exit
// code stays 1.
func TestCLIServerDown(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	for _, args := range [][]string{
		{"models", "list", "--api", down},
		{"login", "--anonymous", "--api", down},
	} {
		_, _, _, err := runForTest(t, args...)
		want := "Cannot reach the svc server at " + down + ". Is the server running? (svc dev starts one; --api or SVC_API names another.)"
		if err == nil || err.Error() != want || ExitCode(err) != ExitFailure {
			t.Errorf("svc %s: %v (exit %d), want %q", strings.Join(args, " "), err, ExitCode(err), want)
		}
	}
	t.Setenv("SVC_API", down)
	if _, _, _, err := runForTest(t, "models", "list"); err == nil || !strings.HasPrefix(err.Error(), "Cannot reach the svc server at "+down+".") {
		t.Errorf("with SVC_API: %v", err)
	}
}

func TestCLIAnonymousFirstRun(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "POST /v1/auth/anonymous":
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(cloudapi.AnonymousToken{Token: "anon-1", Identity: cloudapi.Identity{ID: "i1", Kind: "anonymous"}})
		case "POST /v1/auth/anonymous/scope":
			json.NewEncoder(w).Encode(cloudapi.Scope{OrgSlug: "o1", ProjectSlug: "p1", ProjectID: "pid"})
		case "POST /v1/orgs/o1/projects/p1/deployments":
			var req cloudapi.CreateDeploymentRequest
			json.NewDecoder(r.Body).Decode(&req)
			if req.Target.Kind != cloudapi.TargetBaseModel || req.RunRetentionMode != "unlimited" {
				w.WriteHeader(400)
				json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"status": 400, "code": "invalid_request", "message": "unexpected body"}})
				return
			}
			w.WriteHeader(201)
			json.NewEncoder(w).Encode(cloudapi.Deployment{ID: "d1", Slug: req.Slug, Target: req.Target, AuthMode: "fixed_api_key", Enabled: true})
		case "GET /v1/orgs/o1/projects/p1/deployments":
			json.NewEncoder(w).Encode(map[string]any{"deployments": []cloudapi.Deployment{}})
		case "GET /v1/orgs/o1/projects/p1/deployments/taken":
			w.WriteHeader(404)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"status": 404, "code": "not_found", "message": "no deployment taken"}})
		default:
			w.WriteHeader(500)
		}
	}))
	defer srv.Close()
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())

	// Listing without a state file shows nothing and asks nothing, as the studio does.
	out, _, _, err := runForTest(t, "deployments", "list", "--api", srv.URL, "--json")
	if err != nil || strings.TrimSpace(out) != "[]" || requests.Load() != 0 {
		t.Fatalf("list: out=%q err=%v requests=%d", out, err, requests.Load())
	}

	out, _, _, err = runForTest(t, "deployments", "create", "--api", srv.URL, "--slug", "demo",
		"--target", "base:m", "--retention", "unlimited", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var d cloudapi.Deployment
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Slug != "demo" {
		t.Fatalf("create printed %q (%v)", out, err)
	}
	s, err := cloudapi.LoadState(".svc/state.json")
	if err != nil || s.OrgSlug != "o1" {
		t.Fatalf("state after create: %+v, %v", s, err)
	}

	// An unknown deployment is looked for as an id, then as a slug; nothing is deleted.
	_, _, _, err = runForTest(t, "deployments", "delete", "taken", "--api", srv.URL)
	if err == nil || !strings.HasPrefix(err.Error(), `No deployment "taken" in project o1/p1`) || !strings.HasSuffix(err.Error(), "list shows both). (not_found, HTTP 404)") {
		t.Fatalf("delete error = %v", err)
	}
}

// startServer is a real svc server on loopback with a fresh SQLite file.
func startServer(t *testing.T) *server.Server {
	return startServerLogging(t, io.Discard)
}

// lockedBuffer is a server log a test reads while the server writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startServerLogging(t *testing.T, log io.Writer) *server.Server {
	t.Helper()
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"),
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// Commands that take a deployment take its slug as well as its id, and a miss says so.
func TestCLIDeploymentBySlugOrID(t *testing.T) {
	var log lockedBuffer
	srv := startServerLogging(t, &log)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	out, _, _, err := runForTest(t, "deployments", "create", "--slug", "by-slug", "--target", "base:sim-llama-3.1-8b-instruct", "--json", api)
	if err != nil {
		t.Fatal(err)
	}
	var d cloudapi.Deployment
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{d.ID, "by-slug"} {
		out, _, _, err := runForTest(t, "deployments", "get", ref, api)
		if err != nil || !strings.Contains(out, d.ID) || !strings.Contains(out, "by-slug") {
			t.Fatalf("deployments get %s: %v\n%s", ref, err, out)
		}
	}
	// A lookup by slug that succeeds leaves no 404 in the server's log.
	if l := log.String(); strings.Contains(l, "404") {
		t.Errorf("the server logged a 404 for lookups that succeeded:\n%s", l)
	}
	out, _, _, err = runForTest(t, "keys", "issue", "by-slug", "--label", "ci", "--json", api)
	if err != nil || !strings.Contains(out, `"plaintext"`) {
		t.Fatalf("keys issue by slug: %v\n%s", err, out)
	}
	if out, _, _, err := runForTest(t, "keys", "list", "by-slug", api); err != nil || !strings.Contains(out, "ci") {
		t.Fatalf("keys list by slug: %v\n%s", err, out)
	}
	if _, _, _, err := runForTest(t, "runs", "list", "by-slug", api); err != nil {
		t.Fatalf("runs list by slug: %v", err)
	}
	if _, _, _, err := runForTest(t, "deployments", "update", "by-slug", "--disable", api); err != nil {
		t.Fatalf("update by slug: %v", err)
	}

	// A miss is a failure reported by the service (exit 1), and says what was looked for.
	_, _, _, err = runForTest(t, "deployments", "get", "no-such-slug", api)
	var ae *cloudapi.Error
	if !errors.As(err, &ae) || ae.Status != 404 || !strings.Contains(ae.Message, "id or slug") || ExitCode(err) != ExitFailure {
		t.Fatalf("get of an unknown slug: %v (exit %d), want a 404 that says ids and slugs are accepted", err, ExitCode(err))
	}

	if _, _, _, err := runForTest(t, "deployments", "delete", "by-slug", api); err != nil {
		t.Fatalf("delete by slug: %v", err)
	}
	if out, _, _, err := runForTest(t, "deployments", "list", "--json", api); err != nil || strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after delete: %v\n%s", err, out)
	}
}

// A signed-in user without .svc/state.json gets missing_state from list as from create: an empty
// table would say "you have no deployments", which is not what is true.
func TestCLISignedInListWithoutState(t *testing.T) {
	srv := startServer(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Chdir(t.TempDir())
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
	if err := cloudapi.SaveCredentials(filepath.Join(home, ".svc", "credentials.json"),
		&cloudapi.Credentials{APIBaseURL: srv.BaseURL, Kind: cloudapi.KindOAuth, Token: pair.AccessToken}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"deployments", "list"}, {"jobs", "list"}} {
		out, _, _, err := runForTest(t, append(args, "--api", srv.BaseURL)...)
		var ae *cloudapi.Error
		if !errors.As(err, &ae) || ae.Code != cloudapi.CodeMissingState || ExitCode(err) != ExitFailure {
			t.Fatalf("%q as a signed-in user without state: err=%v exit=%d out=%q, want missing_state and exit 1", args, err, ExitCode(err), out)
		}
		if !strings.Contains(ae.Message, "svc use") {
			t.Errorf("the message does not say how to pick a project: %s", ae.Message)
		}
	}
	if _, err := os.Stat(".svc/state.json"); err == nil {
		t.Fatal("list wrote the state file")
	}
}
