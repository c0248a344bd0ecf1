package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/mockupstream"
	"github.com/svcdev/svc/internal/server"
)

// svc evals create --wait, list, get, results and cancel, and the gate through svc deployments update
// --promote-gate and canary promote --override, against a real server.
func TestCLIEvals(t *testing.T) {
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	run := func(args ...string) (string, string, error) {
		t.Helper()
		out, errOut, _, err := runForTest(t, append(args, "--api", srv.BaseURL)...)
		return out, errOut, err
	}
	if _, _, err := run("deployments", "create", "--slug", "cli-evals", "--target", "base:sim-llama-3.1-8b-instruct", "--auth", "none"); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		resp, err := http.Post(srv.BaseURL+"/e/cli-evals/v1/chat/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":"question %d"}]}`, i)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("call: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	srv.Flush()
	if _, _, err := run("evals", "create", "cli-evals"); err == nil || !strings.Contains(err.Error(), "--candidate is required") {
		t.Fatalf("create without a candidate or canary: %v", err)
	}
	out, progress, err := run("evals", "create", "cli-evals", "--candidate", "base:sim-llama-3.1-8b-instruct", "--wait")
	if err != nil || !strings.Contains(out, "state:") || !strings.Contains(out, "done") || !strings.Contains(out, "6 of 6 pairs") ||
		!strings.Contains(out, "passed:") || !strings.Contains(progress, "6/6 replayed") {
		t.Fatalf("create --wait: %v\n%s\nstderr:\n%s", err, out, progress)
	}
	out, _, err = run("evals", "list", "cli-evals", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var page cloudapi.EvalPage
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Evals) != 1 || page.Evals[0].State != cloudapi.EvalDone {
		t.Fatalf("list: %v\n%s", err, out)
	}
	id := page.Evals[0].ID
	if out, _, err = run("evals", "results", "cli-evals", id); err != nil || strings.Count(out, "run_") != 6 || !strings.Contains(out, "finish_reason pass/pass") {
		t.Fatalf("results: %v\n%s", err, out)
	}
	if _, _, err = run("evals", "export", "cli-evals", id); err == nil || !strings.Contains(err.Error(), "has no judge") || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("export of an eval without a judge: %v", err)
	}
	if out, _, err = run("evals", "get", "cli-evals", id, "--watch"); err != nil || !strings.Contains(out, id) {
		t.Fatalf("get --watch: %v\n%s", err, out)
	}
	if out, _, err = run("evals", "cancel", "cli-evals", id); err != nil || !strings.Contains(out, "done") {
		t.Fatalf("cancel of a done eval: %v\n%s", err, out)
	}

	// The gate: a canary on a target no eval has seen is refused, then promoted with a reason.
	if out, _, err = run("deployments", "update", "cli-evals", "--promote-gate", "0:24"); err != nil || !strings.Contains(out, "at most 24 h old") {
		t.Fatalf("--promote-gate: %v\n%s", err, out)
	}
	if _, _, err = run("deployments", "update", "cli-evals", "--promote-gate", "2"); err == nil || ExitCode(err) != ExitUsage {
		t.Fatalf("--promote-gate 2: %v", err)
	}
	if _, _, err = run("deployments", "canary", "set", "cli-evals", "--target", "base:sim-qwen3-8b", "--percent", "10"); err != nil {
		t.Fatal(err)
	}
	if _, _, err = run("deployments", "canary", "promote", "cli-evals"); err == nil || !strings.Contains(err.Error(), "eval_required") {
		t.Fatalf("promote without an eval: %v", err)
	}
	if out, _, err = run("deployments", "canary", "promote", "cli-evals", "--override", "trying it out"); err != nil || !strings.Contains(out, "sim-qwen3-8b") {
		t.Fatalf("promote --override: %v\n%s", err, out)
	}
}

// svc evals export writes a judged eval's pairs to standard output as preference lines and says on
// standard error what it wrote and left out: a judge that prefers the answer repeating "question", the
// recorded echo against a lorem candidate, half the calls saying it (preferred) and half not (ties).
func TestCLIEvalsExport(t *testing.T) {
	judge := httptest.NewServer(mockupstream.Judge("question"))
	defer judge.Close()
	models := filepath.Join(t.TempDir(), "models.yaml")
	if err := os.WriteFile(models, []byte(`models:
  - name: sim-base
    runtime: simulator
    public: true
    simulator: {mode: echo}
  - name: sim-lorem
    runtime: simulator
    public: true
    simulator: {mode: lorem}
  - name: judge
    runtime: openai
    public: true
    upstreamUrl: `+judge.URL+`/v1
    upstreamModel: judge
`), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(t.TempDir(), "data"), ModelsFile: models,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	run := func(args ...string) (string, string, error) {
		t.Helper()
		out, errOut, _, err := runForTest(t, append(args, "--api", srv.BaseURL)...)
		return out, errOut, err
	}
	if _, _, err := run("deployments", "create", "--slug", "cli-prefs", "--target", "base:sim-base", "--auth", "none"); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		text := fmt.Sprintf("question %d", i)
		if i%2 == 1 {
			text = fmt.Sprintf("hello %d", i)
		}
		resp, err := http.Post(srv.BaseURL+"/e/cli-prefs/v1/chat/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, text)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("call: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	srv.Flush()
	out, progress, err := run("evals", "create", "cli-prefs", "--candidate", "base:sim-lorem", "--judge", "judge", "--wait", "--json")
	if err != nil {
		t.Fatalf("create: %v\n%s", err, progress)
	}
	var e cloudapi.Eval
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.State != cloudapi.EvalDone {
		t.Fatalf("create --wait: %v\n%s", err, out)
	}
	out, summary, err := run("evals", "export", "cli-prefs", e.ID)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || strings.TrimSpace(summary) != "3 pairs written, 3 left out (tie 3)" {
		t.Fatalf("export: %d lines, stderr %q\n%s", len(lines), summary, out)
	}
	for _, l := range lines {
		if err := dataset.ValidatePreferenceLine([]byte(l)); err != nil || !strings.Contains(l, `"preferred_output":[{"role":"assistant","content":"question`) {
			t.Fatalf("line %v: %s", err, l)
		}
	}
}
