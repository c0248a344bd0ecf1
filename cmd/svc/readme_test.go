package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// readmeWalkthrough is the shell block of the README's "### A walk-through" section, as written.
func readmeWalkthrough(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n### A walk-through\n")
	if !ok {
		t.Fatal(`README.md has no "### A walk-through" section`)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("the walk-through has no sh block")
	}
	block, _, ok = strings.Cut(block, "\n```")
	if !ok {
		t.Fatal("the walk-through's sh block does not end")
	}
	return block
}

// The README's walk-through, run as written with the `bin/svc` that `make run` leaves, in the folder
// where `make run` runs `svc dev`: what it creates shows up in that studio's list.
func TestReadmeWalkthroughShowsInTheStudio(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed (make test-deps installs it)")
	}
	script := readmeWalkthrough(t)
	home, repo := t.TempDir(), t.TempDir()
	// The layout `make run` leaves: bin/svc in the folder where `svc dev` runs.
	if err := os.MkdirAll(filepath.Join(repo, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(svcBin, filepath.Join(repo, "bin", "svc")); err != nil {
		t.Fatal(err)
	}
	// The studio comes up first, as the README has it; free ports instead of 8080, which the CLI
	// learns from SVC_API (its documented variable) instead of its default.
	dev := startDev(t, repo, svcEnv(home), "--addr", "127.0.0.1:0", "--data", filepath.Join(home, "dev-data"))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = repo, svcEnv(home, "SVC_API="+dev.apiBase)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walk-through failed: %v\n%s", err, out)
	}
	for _, want := range []string{`"chat.completion"`, "my-first-model", `"object":"feedback"`, "1 run written"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walk-through's output lacks %s:\n%s", want, out)
		}
	}
	// The run scored good, as a fine-tuning line.
	if train, err := os.ReadFile(filepath.Join(repo, "train.jsonl")); err != nil || strings.Count(string(train), "\n") != 1 || !strings.Contains(string(train), "Hello again!") {
		t.Errorf("train.jsonl: %v\n%s", err, train)
	}

	// What the walk-through wrote in the folder (train.jsonl, the project's .svc) leaves git's status
	// clean: the repository ignores it.
	entries, err := os.ReadDir(repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "bin" {
			continue // made above, as make run does
		}
		name := e.Name()
		if e.IsDir() {
			name += "/" // a folder's pattern (.svc/) matches a path that says it is one
		}
		if out, err := exec.Command("git", "-C", filepath.Join("..", ".."), "check-ignore", "-q", "--no-index", name).CombinedOutput(); err != nil {
			t.Errorf("the walk-through leaves %s, which git does not ignore: %v %s", name, err, out)
		}
	}

	// The studio's list route, called as its page calls it (with the page's CSRF token).
	page := httpGet(t, dev.studioURL, nil)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the studio page:\n%s", page)
	}
	var list struct {
		Deployments []struct {
			Slug string `json:"slug"`
		} `json:"deployments"`
	}
	body := httpGet(t, dev.studioURL+"api/deployments", http.Header{"X-CSRF-Token": {m[1]}})
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("studio list %q: %v", body, err)
	}
	if len(list.Deployments) != 1 || list.Deployments[0].Slug != "my-first-model" {
		t.Fatalf("the studio lists %s, want my-first-model from the walk-through", body)
	}
}

func httpGet(t *testing.T, url string, h http.Header) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return string(b)
}
