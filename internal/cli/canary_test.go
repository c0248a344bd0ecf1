package cli

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/server"
)

// svc deployments canary set, compare, promote and end, against a real server.
func TestCLICanary(t *testing.T) {
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	run := func(args ...string) (string, error) {
		t.Helper()
		out, _, _, err := runForTest(t, append(args, "--api", srv.BaseURL)...)
		return out, err
	}
	out, err := run("deployments", "create", "--slug", "cli-canary", "--target", "base:sim-llama-3.1-8b-instruct", "--auth", "none", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var d cloudapi.Deployment
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if out, err = run("deployments", "get", "cli-canary"); err != nil || !strings.Contains(out, "canary:") || !strings.Contains(out, "none") {
		t.Fatalf("get without a canary: %v\n%s", err, out)
	}
	out, err = run("deployments", "canary", "set", "cli-canary", "--target", "base:sim-qwen3-8b", "--percent", "40")
	if err != nil || !strings.Contains(out, "40% split") || !strings.Contains(out, "base:sim-qwen3-8b") {
		t.Fatalf("canary set: %v\n%s", err, out)
	}
	if _, err = run("deployments", "canary", "set", "cli-canary", "--target", "base:sim-qwen3-8b", "--percent", "100"); err == nil ||
		!strings.Contains(err.Error(), "canary.percent") {
		t.Fatalf("percent 100: %v", err)
	}
	if _, err = run("deployments", "canary", "set", "cli-canary", "--percent", "5"); err == nil || ExitCode(err) != ExitUsage {
		t.Fatalf("set without --target: %v", err)
	}
	// Calls through the edge (sessions by user), then the arms side by side.
	for i := range 20 {
		req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/cli-canary/v1/chat/completions",
			strings.NewReader(`{"user":"u`+string(rune('a'+i))+`","messages":[{"role":"user","content":"hi"}]}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("call: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	srv.Flush()
	out, err = run("deployments", "canary", "compare", "cli-canary")
	if err != nil || !strings.Contains(out, "TTFT P50") || !strings.Contains(out, "primary") || !strings.Contains(out, "sim-llama-3.1-8b-instruct") ||
		!strings.Contains(out, "canary") || !strings.Contains(out, "sim-qwen3-8b") {
		t.Fatalf("compare: %v\n%s", err, out)
	}
	out, err = run("deployments", "canary", "promote", "cli-canary")
	if err != nil || !strings.Contains(out, "base:sim-qwen3-8b") || !strings.Contains(out, "canary:    none") {
		t.Fatalf("promote: %v\n%s", err, out)
	}
	if _, err = run("deployments", "canary", "promote", "cli-canary"); err == nil || !strings.Contains(err.Error(), "no canary") {
		t.Fatalf("promote again: %v", err)
	}
	run("deployments", "canary", "set", "cli-canary", "--target", "base:sim-llama-3.1-8b-instruct", "--percent", "5", "--mode", "shadow")
	out, err = run("deployments", "canary", "end", "cli-canary")
	if err != nil || !strings.Contains(out, "canary:    none") {
		t.Fatalf("end: %v\n%s", err, out)
	}
}

// A shadow canary copies every call: svc deployments canary set --mode shadow needs no --percent, and
// the canary reads "shadow" (no share) in deployments get and list; split without --percent is a usage
// error that says shadow needs none.
func TestCLIShadowCanaryWithoutPercent(t *testing.T) {
	srv := startServer(t)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	run := func(args ...string) (string, error) {
		t.Helper()
		out, _, _, err := runForTest(t, append(args, api)...)
		return out, err
	}
	if _, err := run("deployments", "create", "--slug", "cli-shadow", "--target", "base:sim-llama-3.1-8b-instruct"); err != nil {
		t.Fatal(err)
	}
	_, err := run("deployments", "canary", "set", "cli-shadow", "--target", "base:sim-qwen3-8b")
	if err == nil || ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--percent is required in split mode") ||
		!strings.Contains(err.Error(), "--mode shadow canary copies every call and needs none") {
		t.Fatalf("split without --percent: %v", err)
	}
	out, err := run("deployments", "canary", "set", "cli-shadow", "--target", "base:sim-qwen3-8b", "--mode", "shadow")
	if err != nil || !strings.Contains(out, "Base model: sim-qwen3-8b, shadow  [base:sim-qwen3-8b]") {
		t.Fatalf("shadow without --percent: %v\n%s", err, out)
	}
	out, err = run("deployments", "list")
	if err != nil || !strings.Contains(out, "base:sim-qwen3-8b shadow") || strings.Contains(out, "0%") {
		t.Fatalf("deployments list: %v\n%s", err, out)
	}
}
