package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
)

// The quick start offers the Messages and Responses APIs and agent recipes beside chat: each sample,
// copied with the card's Copy button and its key filled in, runs as pasted with the real npm client it
// names (@anthropic-ai/sdk, openai's responses.create, the AI SDK) or with curl; the recipes of Claude
// Code and Codex carry the endpoint's URLs; at a laptop's and a phone's width.
func TestQuickStartMessagesResponsesAndAgents(t *testing.T) {
	atWidths(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		cl, err := e.local.ScopedClient(ctx)
		e.must(err)
		d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
			Slug: "ops", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
		})
		e.must(err)
		k, err := cl.IssueDeploymentKey(ctx, d.ID, "laptop")
		e.must(err)
		base := e.api.BaseURL + "/e/ops/v1"
		e.open("#/endpoints/" + d.ID)
		e.must(expect.Locator(e.testid("qs-curl")).ToBeVisible())

		pick := func(testid, value string) {
			t.Helper()
			_, err := e.testid(testid).SelectOption(playwright.SelectOptionValues{Values: &[]string{value}})
			e.must(err)
		}
		// copy shows a sample by the card's controls and copies it with the Copy button.
		copySample := func(op, lang, testid string) string {
			t.Helper()
			pick("qs-op", op)
			if lang != "" {
				pick("qs-lang", lang)
			}
			e.must(expect.Locator(e.testid(testid)).ToBeVisible())
			e.copyBy("qs-copy")
			clip := e.clipboard()
			if clip != e.textOf(testid) {
				t.Fatalf("Copy put another text on the clipboard than the %s sample:\n%s", testid, clip)
			}
			return strings.ReplaceAll(clip, "<API_KEY>", k.Plaintext)
		}

		// Messages: Anthropic's npm SDK with the base URL without /v1, and curl.
		js := copySample("messages", "javascript", "qs-messages-javascript")
		if !strings.Contains(js, `baseURL: "`+e.api.BaseURL+`/e/ops"`) {
			t.Fatalf("the Messages sample's base URL:\n%s", js)
		}
		e.snap("qs-messages")
		if out := runNodeSample(t, js, "npm install @anthropic-ai/sdk"); strings.TrimSpace(out) != "Hello!" {
			t.Fatalf("the Messages sample printed %q", out)
		}
		if out := runCurl(t, copySample("messages", "curl", "qs-messages-curl")); !strings.Contains(out, `"type":"message"`) {
			t.Fatalf("the Messages cURL sample:\n%s", out)
		}
		// Responses: openai's responses.create, and curl.
		if out := runNodeSample(t, copySample("responses", "javascript", "qs-responses-javascript"), "npm install openai"); strings.TrimSpace(out) != "Hello!" {
			t.Fatalf("the Responses sample printed %q", out)
		}
		if out := runCurl(t, copySample("responses", "curl", "qs-responses-curl")); !strings.Contains(out, `"object":"response"`) {
			t.Fatalf("the Responses cURL sample:\n%s", out)
		}
		e.must(expect.Locator(e.testid("qs-responses-python")).ToBeHidden())
		pick("qs-lang", "python")
		e.must(expect.Locator(e.testid("qs-responses-python")).ToContainText(`response = client.responses.create(`))

		// Recipes: one text whatever the language, the language control off while one shows.
		ai := copySample("ai-sdk", "", "qs-ai-sdk")
		e.must(expect.Locator(e.testid("qs-lang")).ToBeDisabled())
		if out := runNodeSample(t, ai, "npm install ai @ai-sdk/openai"); strings.TrimSpace(out) != "Hello!" {
			t.Fatalf("the AI SDK sample printed %q", out)
		}
		claude := copySample("claude-code", "", "qs-claude-code")
		for _, want := range []string{"export ANTHROPIC_BASE_URL='" + e.api.BaseURL + "/e/ops'", "export ANTHROPIC_AUTH_TOKEN='" + k.Plaintext + "'", "\nclaude"} {
			if !strings.Contains(claude, want) {
				t.Errorf("the Claude Code recipe lacks %q:\n%s", want, claude)
			}
		}
		e.snap("qs-claude-code")
		codex := copySample("codex", "", "qs-codex")
		for _, want := range []string{`base_url = "` + base + `"`, `wire_api = "responses"`, `model_provider = "svc"`, `model = "sim-llama-3.1-8b-instruct"`} {
			if !strings.Contains(codex, want) {
				t.Errorf("the Codex recipe lacks %q:\n%s", want, codex)
			}
		}
		e.snap("qs-codex")
		pick("qs-op", "chat")
		e.must(expect.Locator(e.testid("qs-lang")).ToBeEnabled())
		e.must(expect.Locator(e.testid("qs-python")).ToBeVisible())
	})
}

// runNodeSample runs a pasted JavaScript sample as a user would: it names its install line (install)
// and the file to save it as; saved there in a folder of its own whose node_modules is the
// repository's (the install done already), run with node.
func runNodeSample(t *testing.T, sample, install string) string {
	t.Helper()
	if !strings.HasPrefix(sample, "// "+install+"\n") {
		t.Fatalf("the sample does not start with its install line %q:\n%s", install, sample)
	}
	m := regexp.MustCompile(`Save as (\S+\.mjs) .*run: node (\S+)`).FindStringSubmatch(sample)
	if m == nil || m[1] != m[2] {
		t.Fatalf("the sample does not say which file to save it as and run:\n%s", sample)
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(repoRoot, "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, m[1]), []byte(sample), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", m[1])
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node %s: %v\n%s\nsample:\n%s", m[1], err, out, sample)
	}
	return string(out)
}

// The quick start's Claude Code and Codex recipes, copied from the page with a key filled in, run the
// real CLIs (the npm packages) against the endpoint as written: Claude Code with the recipe's exports,
// Codex with the recipe as its config.toml and the key in the variable the recipe names.
func TestQuickStartAgentRecipesRun(t *testing.T) {
	e := newEnv(t)
	e.width = 1280
	ctx := context.Background()
	cl, err := e.local.ScopedClient(ctx)
	e.must(err)
	d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{
		Slug: "agents", Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-llama-3.1-8b-instruct"},
	})
	e.must(err)
	k, err := cl.IssueDeploymentKey(ctx, d.ID, "agent")
	e.must(err)
	e.open("#/endpoints/" + d.ID)
	e.must(expect.Locator(e.testid("qs-curl")).ToBeVisible())
	recipe := func(op string) string {
		_, err := e.testid("qs-op").SelectOption(playwright.SelectOptionValues{Values: &[]string{op}})
		e.must(err)
		e.must(e.testid("qs-copy").Click())
		return strings.ReplaceAll(e.clipboard(), "<API_KEY>", k.Plaintext)
	}
	home := t.TempDir()
	quiet := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir(), "LANG=C.UTF-8", "NO_COLOR=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1", "CODEX_DISABLE_UPDATE_CHECK=1"}
	exports := regexp.MustCompile(`(?m)^export (\w+)='([^']*)'`)

	// Claude Code: the recipe's exports, then claude (asked once with -p).
	env := append([]string(nil), quiet...)
	for _, m := range exports.FindAllStringSubmatch(recipe("claude-code"), -1) {
		env = append(env, m[1]+"="+m[2])
	}
	out := runAgent(t, env, home, filepath.Join(repoRoot, "node_modules/@anthropic-ai/claude-code/bin/claude.exe"), "-p", "say hello", "--output-format", "json")
	if !strings.Contains(out, `"is_error":false`) || !strings.Contains(out, "say hello") {
		t.Fatalf("claude with the recipe's settings:\n%s", out)
	}

	// Codex: the recipe is the config.toml; its key in SVC_API_KEY, as its comment says.
	codex := recipe("codex")
	m := regexp.MustCompile(`export SVC_API_KEY='([^']*)'; codex`).FindStringSubmatch(codex)
	if m == nil {
		t.Fatalf("the Codex recipe does not say how to give the key:\n%s", codex)
	}
	codexHome := filepath.Join(home, ".codex")
	e.must(os.MkdirAll(codexHome, 0o755))
	e.must(os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codex+"\n"), 0o644))
	out = runAgent(t, append(quiet, "CODEX_HOME="+codexHome, "SVC_API_KEY="+m[1]), home,
		filepath.Join(repoRoot, "node_modules/@openai/codex/bin/codex.js"), "exec", "--skip-git-repo-check", "say hello to codex")
	if !strings.Contains(out, "say hello to codex") {
		t.Fatalf("codex with the recipe as its config:\n%s", out)
	}
	// Both were answered by the endpoint: their runs are there, Messages and Responses.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		e.api.Flush()
		msgs, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Surface: "messages"})
		e.must(err)
		resps, err := cl.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Surface: "responses"})
		e.must(err)
		if len(msgs.Runs) > 0 && len(resps.Runs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs: %d Messages, %d Responses", len(msgs.Runs), len(resps.Runs))
		}
	}
}

// runAgent runs an agent CLI with env in dir, its stdin closed (codex exec waits for it otherwise),
// bounded in time, and returns its output.
func runAgent(t *testing.T, env []string, dir, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	if strings.HasSuffix(bin, ".js") {
		cmd = exec.CommandContext(ctx, "node", append([]string{bin}, args...)...)
	}
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(bin), err, out)
	}
	return string(out)
}
