package edge_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/dataset"
	"github.com/svcdev/svc/internal/mockupstream"
)

// TestAgentCLIs runs Codex (`codex exec`, over the Responses API) and Claude Code (`claude -p`, over the
// Messages translation) from npm against simulated models, each a plain turn and a turn that calls a
// tool, and the AI SDK's default provider in a three-turn tool session (tests/node/cli/agents.cli.mjs);
// it checks that their calls were recorded, and that the export writes every answered run of each as a
// fine-tuning line whose tool calls name the tools it declares.
func TestAgentCLIs(t *testing.T) {
	root := repoRoot(t)
	node, err := exec.LookPath("node")
	if err != nil {
		missingTestDeps(t, "node is not installed (the agent CLI tests need Node 20)")
	}
	// The pinned CLIs, then the newest (package.json's npm aliases claude-code-next and codex-next).
	for _, v := range []struct{ name, codex, claude string }{
		{"pinned", "@openai/codex", "@anthropic-ai/claude-code"},
		{"newest", "codex-next", "claude-code-next"},
	} {
		t.Run(v.name, func(t *testing.T) {
			for _, p := range []string{v.codex + "/bin/codex.js", v.claude + "/bin/claude.exe"} {
				if _, err := os.Stat(filepath.Join(root, "node_modules", p)); err != nil {
					missingTestDeps(t, "node_modules/"+p+" is missing")
				}
			}
			agentCLIs(t, root, node, v.codex, v.claude, v.name == "pinned")
		})
	}
}

// agentCLIs runs tests/node/cli/agents.cli.mjs with these packages of the CLIs (and the AI SDK's session
// when aiSDK), then exports each client's runs.
func agentCLIs(t *testing.T, root, node, codexPkg, claudePkg string, aiSDK bool) {
	e := newEnv(t)
	codex, codexKey := e.deploy("cli-codex", base("sim-echo"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	claude, claudeKey := e.deploy("cli-claude", base("sim-think"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	aisdk, aisdkKey := e.deploy("cli-aisdk", base("sim-echo"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	// The fake vLLM upstream, reasoning as vLLM does with a reasoning parser; both CLIs share one key
	// through auth mode none.
	e.deploy("cli-up", base("up"), cloudapi.AuthNone, "", 0)
	e.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Reasoning: "reasoning_content", ServeTokenize: true})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "tests/node/cli/agents.cli.mjs")
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"SVC_EDGE_BASE=http://"+e.srv.Addr.String(), "SVC_CODEX_PKG="+codexPkg, "SVC_CLAUDE_PKG="+claudePkg,
		"SVC_CODEX_SLUG=cli-codex", "SVC_CODEX_KEY="+codexKey, "SVC_CODEX_MODEL=sim-echo",
		"SVC_CLAUDE_SLUG=cli-claude", "SVC_CLAUDE_KEY="+claudeKey, "SVC_CLAUDE_MODEL=sim-think", "SVC_UP_SLUG=cli-up",
	)
	clients := []*core.Deployment{codex, claude}
	if aiSDK {
		cmd.Env = append(cmd.Env, "SVC_AISDK_SLUG=cli-aisdk", "SVC_AISDK_KEY="+aisdkKey)
		clients = append(clients, aisdk)
	}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("node --test tests/node/cli/agents.cli.mjs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	// Every call was recorded: a plain turn is one call, a tool turn at least two.
	if runs := e.runs(codex.ID, 3); len(runs) < 3 {
		t.Errorf("codex: %d runs", len(runs))
	}
	if runs := e.runs(claude.ID, 3); len(runs) < 3 {
		t.Errorf("claude: %d runs", len(runs))
	}
	if runs := e.runs(aisdk.ID, 5); aiSDK && len(runs) < 5 {
		t.Errorf("ai sdk: %d runs, want two for each tool turn and one for the other", len(runs))
	}
	// No call of a client was refused: every run answered.
	for _, d := range clients {
		for _, r := range e.runs(d.ID, 1) {
			if r["status"] != "ok" {
				t.Errorf("%s: a run %v: %v %v", d.Slug, r["status"], r["errorCode"], r["errorMessage"])
			}
		}
	}
	// Every answered run of each client is a line of OpenAI's chat fine-tuning format, whose tool calls
	// name the tools it declares (docs/API.md, "Export: a run as a fine-tuning line").
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	for _, d := range clients {
		answered := 0
		for _, r := range e.runs(d.ID, 3) {
			if r["status"] == "ok" {
				answered++
			}
		}
		lines, counts := export(t, api, d.ID, cloudapi.ExportOptions{})
		if len(lines) != answered || counts.Written != answered {
			t.Errorf("%s: %d answered runs, %d lines, counts %+v", d.Slug, answered, len(lines), counts)
		}
		calls := 0
		for i, l := range lines {
			if err := dataset.ValidateChatLine([]byte(l)); err != nil {
				t.Errorf("%s line %d: %v\n%.2000s", d.Slug, i, err, l)
			}
			if err := dataset.ValidateToolsDeclared([]byte(l)); err != nil {
				t.Errorf("%s line %d: %v\n%.2000s", d.Slug, i, err, l)
			}
			calls += strings.Count(l, `"tool_calls"`)
		}
		if calls == 0 {
			t.Errorf("%s: no line holds a tool call", d.Slug)
		}
	}
}
