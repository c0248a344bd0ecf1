package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// svc runs list filters by status, key (by label), arm and time, shows the ARM of each run (primary,
// shadow), carries the filters into its "more:" line, and refuses values it does not know as usage
// errors; svc runs get says a shadow copy's arm and the run it copies.
func TestCLIRunsListFiltersAndArmColumn(t *testing.T) {
	srv := startServer(t)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	run := func(args ...string) (string, error) {
		t.Helper()
		out, _, _, err := runForTest(t, append(args, api)...)
		return out, err
	}
	if _, err := run("deployments", "create", "--slug", "cli-log", "--target", "base:sim-llama-3.1-8b-instruct"); err != nil {
		t.Fatal(err)
	}
	if out, err := run("deployments", "canary", "set", "cli-log", "--target", "base:sim-qwen3-8b", "--percent", "10", "--mode", "shadow"); err != nil {
		t.Fatalf("canary set: %v\n%s", err, out)
	}
	out, err := run("keys", "issue", "cli-log", "--label", "ci", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var k cloudapi.IssuedKey
	json.Unmarshal([]byte(out), &k)
	for _, body := range []string{`{"messages":"not a list"}`, `{"messages":[{"role":"user","content":"a question"}]}`} {
		req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/cli-log/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+k.Plaintext)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Wait for the shadow copy of the answered call.
	var shadowID, primaryID string
	for deadline := time.Now().Add(10 * time.Second); shadowID == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		srv.Flush()
		out, err = run("runs", "list", "cli-log", "--arm", "shadow", "--status", "ok", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var page cloudapi.RunPage
		json.Unmarshal([]byte(out), &page)
		if len(page.Runs) == 1 {
			shadowID, primaryID = page.Runs[0].ID, page.Runs[0].ShadowOf
		}
	}
	if shadowID == "" {
		t.Fatal("no shadow copy recorded")
	}

	out, err = run("runs", "list", "cli-log", "--status", "ok", "--key", "ci", "--since", "1h")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "ARM") {
		t.Fatalf("answered runs of key ci: want a header and 2 rows (the call, its copy)\n%s", out)
	}
	for _, want := range []string{shadowID + "  ok      shadow", primaryID + "  ok      primary"} {
		if !strings.Contains(out, want) {
			t.Errorf("no row %q in\n%s", want, out)
		}
	}
	out, err = run("runs", "list", "cli-log", "--status", "error")
	if err != nil || strings.Count(strings.TrimSpace(out), "\n") < 1 || strings.Contains(out, "  ok  ") || !strings.Contains(out, "error 400") {
		t.Fatalf("failed runs: %v\n%s", err, out)
	}
	out, err = run("runs", "list", "cli-log", "--arm", "primary", "--limit", "1")
	if err != nil || !strings.Contains(out, "more: svc runs list cli-log --arm primary --limit 1 --cursor ") {
		t.Fatalf("a page of the primary's runs: %v\n%s", err, out)
	}
	if out, err = run("runs", "list", "cli-log", "--since", "2999-01-01"); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("runs since the future: %v\n%s", err, out)
	}
	out, err = run("runs", "get", "cli-log", shadowID)
	if err != nil || !strings.Contains(out, "shadow (sim-qwen3-8b), a copy of "+primaryID) {
		t.Fatalf("runs get of the copy: %v\n%s", err, out)
	}

	if out, err = run("runs", "list", "cli-log", "--status", "refused"); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("no call was turned away with 429: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"--status", "declined"}, {"--arm", "blue"}, {"--since", "yesterday"}} {
		if _, err := run(append([]string{"runs", "list", "cli-log"}, args...)...); err == nil || ExitCode(err) != ExitUsage {
			t.Errorf("runs list %v: %v, want a usage error", args, err)
		}
	}
	if _, err := run("runs", "list", "cli-log", "--key", "nobody"); err == nil || !strings.Contains(err.Error(), `cli-log has no key "nobody"`) {
		t.Errorf("an unknown key: %v", err)
	}
}

// svc deployments list has a CANARY column; canary promote and end without a canary say how to start
// one with the CLI rather than with a raw PATCH.
func TestCLICanaryColumnAndNoCanaryAdvice(t *testing.T) {
	srv := startServer(t)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	run := func(args ...string) (string, error) {
		t.Helper()
		out, _, _, err := runForTest(t, append(args, api)...)
		return out, err
	}
	for _, slug := range []string{"cli-plain", "cli-tried"} {
		if _, err := run("deployments", "create", "--slug", slug, "--target", "base:sim-llama-3.1-8b-instruct"); err != nil {
			t.Fatal(err)
		}
	}
	for _, verb := range []string{"promote", "end"} {
		_, err := run("deployments", "canary", verb, "cli-plain")
		if err == nil || ExitCode(err) != 1 || strings.Contains(err.Error(), "PATCH") ||
			!strings.Contains(err.Error(), "cli-plain has no canary: start one with svc deployments canary set cli-plain --target T --percent N") {
			t.Errorf("canary %s without a canary: %v", verb, err)
		}
	}
	if out, err := run("deployments", "canary", "set", "cli-tried", "--target", "base:sim-qwen3-8b", "--percent", "25"); err != nil {
		t.Fatalf("canary set: %v\n%s", err, out)
	}
	out, err := run("deployments", "list")
	if err != nil || !strings.Contains(out, "CANARY") {
		t.Fatalf("deployments list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.Contains(line, "cli-tried") && !strings.Contains(line, "base:sim-qwen3-8b 25% split"),
			strings.Contains(line, "cli-plain") && !strings.Contains(line, "Base model: sim-llama-3.1-8b-instruct  -  "):
			t.Errorf("deployments list row: %q", line)
		}
	}
}

// svc runs list --surface lists the runs of one route (chat, messages, responses), shows each run's
// SURFACE, carries the filter into its "more:" line, and an unknown surface is the API's 400 naming the
// surfaces it takes.
func TestCLIRunsListSurface(t *testing.T) {
	srv := startServer(t)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	run := func(args ...string) (string, error) {
		t.Helper()
		out, _, _, err := runForTest(t, append(args, api)...)
		return out, err
	}
	if _, err := run("deployments", "create", "--slug", "cli-surf", "--target", "base:sim-llama-3.1-8b-instruct"); err != nil {
		t.Fatal(err)
	}
	out, err := run("keys", "issue", "cli-surf", "--label", "ci", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var k cloudapi.IssuedKey
	json.Unmarshal([]byte(out), &k)
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"by chat"}]}`},
		{"/v1/messages", `{"max_tokens":16,"messages":[{"role":"user","content":"by messages"}]}`},
		{"/v1/messages", `{"max_tokens":16,"messages":[{"role":"user","content":"by messages again"}]}`},
		{"/v1/responses", `{"input":"by responses"}`},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/cli-surf"+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+k.Plaintext)
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", c.path, resp.StatusCode)
		}
	}
	var page cloudapi.RunPage
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		srv.Flush()
		out, err = run("runs", "list", "cli-surf", "--json")
		if err != nil {
			t.Fatal(err)
		}
		page = cloudapi.RunPage{}
		json.Unmarshal([]byte(out), &page)
		if len(page.Runs) == 4 || time.Now().After(deadline) {
			break
		}
	}
	if len(page.Runs) != 4 {
		t.Fatalf("want 4 runs, got %d", len(page.Runs))
	}
	out, err = run("runs", "list", "cli-surf", "--surface", "messages", "--json")
	if err != nil {
		t.Fatal(err)
	}
	page = cloudapi.RunPage{}
	json.Unmarshal([]byte(out), &page)
	if len(page.Runs) != 2 || page.Runs[0].Surface != "messages" || page.Runs[1].Surface != "messages" {
		t.Fatalf("--surface messages: want the 2 Messages runs\n%s", out)
	}
	out, err = run("runs", "list", "cli-surf", "--surface", "responses")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "SURFACE") || !strings.Contains(lines[1], " responses ") {
		t.Fatalf("--surface responses: want a header with SURFACE and one responses row: %v\n%s", err, out)
	}
	out, err = run("runs", "list", "cli-surf", "--surface", "messages", "--limit", "1")
	if err != nil || !strings.Contains(out, "more: svc runs list cli-surf --surface messages --limit 1 --cursor ") {
		t.Fatalf("a page of the Messages runs: %v\n%s", err, out)
	}
	_, err = run("runs", "list", "cli-surf", "--surface", "soap")
	if err == nil || !strings.Contains(err.Error(), "urface must be one of chat, messages, responses, embeddings, completions") {
		t.Fatalf("--surface soap: %v", err)
	}
}
