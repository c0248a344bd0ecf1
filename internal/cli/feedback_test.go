package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/dataset"
)

// svc runs feedback scores a run; svc runs export --since 7d --min-score 1 writes the runs scored 1
// as fine-tuning lines to standard output, and says what it wrote and left out on standard error.
func TestCLIFeedbackAndExport(t *testing.T) {
	srv := startServer(t)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	out, _, _, err := runForTest(t, "deployments", "create", "--slug", "cli-export", "--target", "base:sim-llama-3.1-8b-instruct", "--json", api)
	if err != nil {
		t.Fatal(err)
	}
	var d cloudapi.Deployment
	json.Unmarshal([]byte(out), &d)
	out, _, _, err = runForTest(t, "keys", "issue", "cli-export", "--label", "ci", "--json", api)
	if err != nil {
		t.Fatal(err)
	}
	var k cloudapi.IssuedKey
	json.Unmarshal([]byte(out), &k)
	call := func(body string) string {
		req, _ := http.NewRequest(http.MethodPost, srv.BaseURL+"/e/cli-export/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+k.Plaintext)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var c struct{ ID string }
		json.Unmarshal(b, &c)
		return c.ID
	}
	good := call(`{"messages":[{"role":"user","content":"a good question"}]}`)
	call(`{"messages":[{"role":"user","content":"an unscored question"}]}`)
	call(`{"messages":"not a list"}`) // failed: left out
	srv.Flush()
	runID := "run_" + strings.TrimPrefix(good, "chatcmpl-")

	out, _, _, err = runForTest(t, "runs", "feedback", "cli-export", runID, "1", "--comment", "spot on", api)
	if err != nil || !strings.Contains(out, `marked good (+1)`) || !strings.Contains(out, `"spot on"`) {
		t.Fatalf("feedback: %v\n%s", err, out)
	}
	if _, _, _, err := runForTest(t, "runs", "feedback", "cli-export", runID, "5", api); err == nil || ExitCode(err) != ExitUsage {
		t.Fatalf("score 5: %v", err)
	}
	if _, _, _, err := runForTest(t, "runs", "feedback", "cli-export", "run_0000000000000none", "1", api); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("unknown run: %v", err)
	}

	out, errOut, _, err := runForTest(t, "runs", "export", "cli-export", "--since", "7d", "--min-score", "1", api)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "a good question") || dataset.ValidateChatLine([]byte(lines[0])) != nil {
		t.Fatalf("export --min-score 1:\n%s", out)
	}
	if strings.TrimSpace(errOut) != "1 run written" {
		t.Errorf("stderr %q", errOut)
	}
	out, errOut, _, err = runForTest(t, "runs", "export", "cli-export", "--since", "1h", api)
	if err != nil || strings.Count(out, "\n") != 2 || strings.TrimSpace(errOut) != "2 runs written, 1 left out (failed 1)" {
		t.Fatalf("export: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if _, _, _, err := runForTest(t, "runs", "export", "cli-export", "--since", "yesterday", api); err == nil || ExitCode(err) != ExitUsage {
		t.Fatalf("--since yesterday: %v", err)
	}
}

// Feedback a person can give and read from the CLI: a negative SCORE as it reads (-1, not "-- -1"), the
// words good, neutral and bad, clear; the comment and its time in svc runs get, runs list (text and
// --json); a flag's value that is a negative number (--min-score -1) stays the flag's.
func TestCLIFeedbackReadableAndNegative(t *testing.T) {
	srv := startServer(t)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	if _, _, _, err := runForTest(t, "deployments", "create", "--slug", "cli-fb", "--target", "base:sim-llama-3.1-8b-instruct", "--auth", "none", api); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.BaseURL+"/e/cli-fb/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"be specific"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var c struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	srv.Flush()
	runID := "run_" + strings.TrimPrefix(c.ID, "chatcmpl-")

	out, _, _, err := runForTest(t, "runs", "feedback", "cli-fb", runID, "-1", "--comment", "wrong: too vague", api)
	if err != nil || !strings.Contains(out, `marked bad (-1) at `) || !strings.Contains(out, `"wrong: too vague"`) {
		t.Fatalf("feedback -1: %v\n%s", err, out)
	}
	out, _, _, err = runForTest(t, "runs", "get", "cli-fb", runID, api)
	if err != nil || !regexp.MustCompile(`(?m)^feedback: +marked bad \(-1\) at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d: "wrong: too vague"$`).MatchString(out) {
		t.Fatalf("runs get does not show the feedback, its time and comment: %v\n%s", err, out)
	}
	out, _, _, err = runForTest(t, "runs", "list", "cli-fb", "--json", api)
	var page cloudapi.RunPage
	if err != nil || json.Unmarshal([]byte(out), &page) != nil || len(page.Runs) != 1 || page.Runs[0].Feedback == nil ||
		page.Runs[0].Feedback.Comment != "wrong: too vague" || page.Runs[0].Feedback.At.IsZero() {
		t.Fatalf("runs list --json: %v\n%s", err, out)
	}
	out, _, _, err = runForTest(t, "runs", "list", "cli-fb", api)
	if err != nil || !strings.Contains(out, "FEEDBACK") || !regexp.MustCompile(runID+`\s+ok\s+-\s+chat\s+\S+\s+-\s+\d+ ms\s+\S+\s+bad\s`).MatchString(out) {
		t.Fatalf("runs list does not mark the run bad: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"neutral"}, "marked neutral (0)"},
		{[]string{"--", "-1"}, "marked bad (-1)"},
		{[]string{"good"}, "marked good (+1)"},
		{[]string{"clear"}, "no feedback"},
		{[]string{"clear"}, "no feedback"}, // nothing to clear: the same answer
	} {
		out, _, _, err = runForTest(t, append([]string{"runs", "feedback", "cli-fb", runID, api}, c.args...)...)
		if err != nil || strings.TrimSpace(out) != "run "+runID+": "+c.want && !strings.HasPrefix(strings.TrimSpace(out), "run "+runID+": "+c.want+" at ") {
			t.Fatalf("feedback %q: %v\n%s", c.args, err, out)
		}
	}
	if out, _, _, err = runForTest(t, "runs", "get", "cli-fb", runID, api); err != nil || !regexp.MustCompile(`(?m)^feedback: +no feedback$`).MatchString(out) {
		t.Fatalf("runs get after clear: %v\n%s", err, out)
	}
	for _, bad := range []string{"5", "-2", "great"} {
		if _, _, _, err := runForTest(t, "runs", "feedback", "cli-fb", runID, bad, api); err == nil || ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "SCORE must be") {
			t.Errorf("score %s: %v", bad, err)
		}
	}
	// A flag's value stays the flag's: --min-score -1 is the export's filter (every run, the unmarked one
	// included), not a positional argument.
	out, errOut, _, err := runForTest(t, "runs", "export", "cli-fb", "--min-score", "-1", api)
	if err != nil || strings.TrimSpace(errOut) != "1 run written" || !strings.Contains(out, "be specific") {
		t.Fatalf("export --min-score -1: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
}

// Runs of a deployment whose retention was none have no transcript: svc runs export writes the runs
// it stored and says how many it left out without one, counted from the usage aggregates.
func TestCLIExportCountsRunsWithoutTranscript(t *testing.T) {
	srv := startServer(t)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	if _, _, _, err := runForTest(t, "deployments", "create", "--slug", "cli-none", "--target", "base:sim-llama-3.1-8b-instruct", "--auth", "none", "--retention", "none", api); err != nil {
		t.Fatal(err)
	}
	call := func(body string) {
		resp, err := http.Post(srv.BaseURL+"/e/cli-none/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	call(`{"messages":[{"role":"user","content":"not kept"}]}`)
	call(`{"messages":[{"role":"user","content":"not kept either"}]}`)
	call(`{"messages":"not a list"}`) // failed, and not kept: not counted
	srv.Flush()
	if _, _, _, err := runForTest(t, "deployments", "update", "cli-none", "--retention", "days:7", api); err != nil {
		t.Fatal(err)
	}
	call(`{"messages":[{"role":"user","content":"kept"}]}`)
	srv.Flush()

	out, errOut, _, err := runForTest(t, "runs", "export", "cli-none", "--since", "1h", api)
	if err != nil || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"kept"`) ||
		strings.TrimSpace(errOut) != "1 run written, 2 left out (no_transcript 2)" {
		t.Fatalf("export: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
}

// Export filters do what they say: --min-score 0 ("not marked bad") takes the unmarked runs too;
// preference-jsonl refuses --arm and --min-score, naming them, says "pairs", and counts a pair whose
// two answers are the same as identical instead of writing it; --until takes a date, its whole day.
func TestCLIExportFiltersSayWhatTheyDo(t *testing.T) {
	srv := startServer(t)
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	api := "--api=" + srv.BaseURL
	cli := func(args ...string) (string, string) {
		t.Helper()
		out, errOut, _, err := runForTest(t, append(args, api)...)
		if err != nil {
			t.Fatalf("svc %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
		}
		return out, errOut
	}
	cli("deployments", "create", "--slug", "cli-filters", "--target", "base:sim-llama-3.1-8b-instruct", "--auth", "none")
	call := func(q string) {
		t.Helper()
		resp, err := http.Post(srv.BaseURL+"/e/cli-filters/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"`+q+`"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// Both models echo: a pair of the same answer. Then a canary that answers lorem: pairs that differ.
	cli("deployments", "canary", "set", "cli-filters", "--target", "base:sim-qwen3-8b", "--percent", "10", "--mode", "shadow")
	call("echoed twice")
	srv.Flush()
	cli("deployments", "canary", "set", "cli-filters", "--target", "base:sim-qwen2.5-7b-instruct", "--percent", "10", "--mode", "shadow")
	call("answered apart")
	call("never scored")
	call("marked bad")
	var page cloudapi.RunPage
	for deadline := time.Now().Add(10 * time.Second); len(page.Runs) < 8 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		srv.Flush()
		out, _ := cli("runs", "list", "cli-filters", "--json")
		page = cloudapi.RunPage{}
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatal(err)
		}
	}
	if len(page.Runs) != 8 {
		t.Fatalf("%d runs, want 4 calls and their 4 copies", len(page.Runs))
	}
	question := map[string]string{} // run id → its question
	for _, r := range page.Runs {
		out, _ := cli("runs", "get", "cli-filters", r.ID, "--json")
		var run cloudapi.Run
		json.Unmarshal([]byte(out), &run)
		for _, q := range []string{"echoed twice", "answered apart", "never scored", "marked bad"} {
			if strings.Contains(string(run.Request), q) {
				question[r.ID] = q
			}
		}
	}
	for _, r := range page.Runs {
		switch q := question[r.ID]; {
		case q == "marked bad" && r.ShadowOf == "":
			cli("runs", "feedback", "cli-filters", r.ID, "-1")
		case q == "echoed twice" || q == "answered apart":
			score := "1" // the primary's answer preferred
			if r.ShadowOf != "" {
				score = "-1"
			}
			cli("runs", "feedback", "cli-filters", r.ID, score)
		}
	}

	// The copies are the deployment's, apart: svc usage counts the 4 calls, then the 4 copies.
	if out, _ := cli("usage", "cli-filters"); !regexp.MustCompile(`(?m)^total\s+4\s+0\s`).MatchString(out) || !strings.Contains(out, "Shadow copies 4 (") {
		t.Errorf("svc usage does not show the copies apart:\n%s", out)
	}

	// minScore 0: every run not marked bad, the unmarked one included.
	out, errOut := cli("runs", "export", "cli-filters", "--min-score", "0")
	if strings.TrimSpace(errOut) != "3 runs written" || strings.Contains(out, "marked bad") || !strings.Contains(out, "never scored") {
		t.Errorf("--min-score 0:\nstdout %s\nstderr %s", out, errOut)
	}
	// The preference pairs: one written, the identical one and the unranked one counted.
	out, errOut = cli("runs", "export", "cli-filters", "--format", "preference-jsonl")
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "answered apart") || strings.TrimSpace(errOut) != "1 pair written, 3 left out (identical 1, unranked 2)" {
		t.Errorf("preference-jsonl:\nstdout %s\nstderr %s", out, errOut)
	}
	for flags, want := range map[string]string{
		"--arm canary":                "arm does not apply to format preference-jsonl",
		"--min-score 1":               "minScore does not apply to format preference-jsonl",
		"--arm primary --min-score 0": "arm and minScore do not apply to format preference-jsonl",
	} {
		args := append([]string{"runs", "export", "cli-filters", "--format", "preference-jsonl"}, strings.Fields(flags)...)
		if out, _, _, err := runForTest(t, append(args, api)...); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) || out != "" {
			t.Errorf("preference-jsonl %s: %v (%q)", flags, err, out)
		}
	}
	// --until takes a date, as the studio does: today's whole day, or nothing of yesterday.
	today := time.Now().Format(time.DateOnly)
	if _, errOut = cli("runs", "export", "cli-filters", "--until", today); strings.TrimSpace(errOut) != "4 runs written" {
		t.Errorf("--until %s: %s", today, errOut)
	}
	yesterday := time.Now().AddDate(0, 0, -1).Format(time.DateOnly)
	if out, errOut = cli("runs", "export", "cli-filters", "--since", "2026-01-01", "--until", yesterday); out != "" || !strings.HasPrefix(strings.TrimSpace(errOut), "0 runs written") {
		t.Errorf("--until %s:\nstdout %s\nstderr %s", yesterday, out, errOut)
	}
}
