package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/svcdev/svc/cloudapi"
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
		var ae *cloudapi.Error
		if !errors.As(err, &ae) && !strings.Contains(stderr, "Usage:") {
			t.Errorf("%q: stderr lacks the usage:\n%s", args, stderr)
		}
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
		case "DELETE /v1/orgs/o1/projects/p1/deployments/taken":
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

	_, _, _, err = runForTest(t, "deployments", "delete", "taken", "--api", srv.URL)
	if err == nil || err.Error() != "no deployment taken (not_found, HTTP 404)" {
		t.Fatalf("delete error = %v", err)
	}
}
