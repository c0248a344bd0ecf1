package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
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
