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

// Limits and usage from the command line, against a real server.
func TestCLILimitsAndUsage(t *testing.T) {
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
	out, err := run("deployments", "create", "--slug", "cli-limits", "--target", "base:sim-llama-3.1-8b-instruct", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var d cloudapi.Deployment
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	out, err = run("keys", "issue", d.ID, "--label", "ci", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var k cloudapi.IssuedKey
	if err := json.Unmarshal([]byte(out), &k); err != nil {
		t.Fatal(err)
	}

	out, err = run("deployments", "update", d.ID, "--rpm", "60", "--tpm", "5000")
	if err != nil || !strings.Contains(out, "60 req/min, 5000 tokens/min") {
		t.Fatalf("set limits: %v\n%s", err, out)
	}
	out, err = run("deployments", "update", d.ID, "--tpm", "none")
	if err != nil || !strings.Contains(out, "limits:") || !strings.Contains(out, "60 req/min") || strings.Contains(out, "tokens/min") {
		t.Fatalf("clear tpm, keep rpm: %v\n%s", err, out)
	}
	// Out of range or no number: refused in the flag's words, as a mistake on the command line.
	for _, v := range []string{"0", "lots", "1000000001"} {
		_, err = run("deployments", "update", d.ID, "--rpm", v)
		if err == nil || ExitCode(err) != ExitUsage ||
			err.Error() != `--rpm must be a whole number from 1 to 1,000,000,000, or none for unlimited (got "`+v+`")` {
			t.Fatalf("--rpm %s: %v", v, err)
		}
	}
	out, err = run("keys", "update", d.ID, k.Key.ID, "--tpm", "500")
	if err != nil || !strings.Contains(out, "500 tokens/min") {
		t.Fatalf("key limits: %v\n%s", err, out)
	}
	out, err = run("keys", "list", d.ID)
	if err != nil || !strings.Contains(out, "LIMITS") || !strings.Contains(out, "500 tokens/min") {
		t.Fatalf("keys list: %v\n%s", err, out)
	}
	if _, err = run("keys", "update", d.ID, k.Key.ID); err == nil {
		t.Fatal("keys update without a limit was accepted")
	}

	// Two calls through the edge, then the usage table by hour and by day.
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/cli-limits/v1/chat/completions",
			strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+k.Plaintext)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// A call with a wrong key is refused, and counted.
	req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/cli-limits/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer sk-ep-wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("wrong key: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	srv.Flush()
	out, err = run("usage", d.ID)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// A header, 24 hours, a total, and what was refused, as the studio's usage card says it.
	if len(lines) != 27 || !strings.HasPrefix(lines[0], "START (UTC)") || !strings.HasPrefix(lines[25], "total") ||
		strings.Fields(lines[25])[1] != "3" || !strings.Contains(lines[24], " ms") || lines[26] != "1 call refused, never run: 1 with a wrong or missing key (401)" {
		t.Fatalf("svc usage:\n%s", out)
	}
	out, err = run("usage", d.ID, "--days", "7", "--key", k.Key.ID)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 9 || strings.Fields(lines[8])[1] != "2" || strings.Fields(lines[7])[2] != "2" {
		t.Fatalf("svc usage --days 7 --key:\n%s (%v)", out, err)
	}
	if _, err = run("usage", d.ID, "--days", "0"); err == nil {
		t.Fatal("--days 0 accepted")
	}

	// A key with a 1-token daily budget: its first call is admitted and spends it, the next two are
	// refused budget_exhausted, which svc usage tells apart from a rate limit, in the card's words.
	out, err = run("keys", "issue", d.ID, "--label", "tiny", "--budget-tokens", "1", "--budget-period", "day", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tiny cloudapi.IssuedKey
	if err := json.Unmarshal([]byte(out), &tiny); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{200, 429, 429} {
		req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/cli-limits/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+tiny.Plaintext)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || want == 429 && !strings.Contains(string(body), "budget_exhausted") {
			t.Fatalf("call %d on the tiny budget: %d %s, want %d", i, resp.StatusCode, body, want)
		}
	}
	srv.Flush()
	out, err = run("usage", d.ID)
	if want := "3 calls refused, never run: 1 with a wrong or missing key (401), 2 past a token budget (429 budget_exhausted)"; err != nil || !strings.Contains(out, want) {
		t.Fatalf("svc usage after budget refusals lacks %q: %v\n%s", want, err, out)
	}
}
