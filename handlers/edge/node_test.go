package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

// repoRoot is where go.mod, node_modules and tests/node live.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// missingTestDeps skips a test whose tools are not installed, naming the command that installs them; under
// `make test` (SVC_TEST_DEPS=required), which has just installed them, it fails instead, so that the
// README's one command never passes with these tests skipped.
func missingTestDeps(t *testing.T, what string) {
	t.Helper()
	msg := what + ": run `make test-deps` (npm packages, Chromium) to run this test"
	if os.Getenv("SVC_TEST_DEPS") == "required" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// TestNodeSDKs runs tests/node with the real openai and @anthropic-ai/sdk packages against a server.
func TestNodeSDKs(t *testing.T) {
	root := repoRoot(t)
	node, err := exec.LookPath("node")
	if err != nil {
		missingTestDeps(t, "node is not installed (the SDK tests need Node 20)")
	}
	for _, pkg := range []string{"openai", "@anthropic-ai/sdk", "zod"} {
		if _, err := os.Stat(filepath.Join(root, "node_modules", pkg, "package.json")); err != nil {
			missingTestDeps(t, "node_modules/"+pkg+" is missing")
		}
	}

	e := newEnv(t)
	ctx := context.Background()
	dk, key := e.deploy("node-key", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	revoked, err := e.srv.Service.IssueKey(ctx, e.pr, dk.ID, "to revoke")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Service.RevokeKey(ctx, e.pr, dk.ID, revoked.Key.ID); err != nil {
		t.Fatal(err)
	}
	off, offKey := e.deploy("node-off", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	disabled := false
	e.update(off.ID, cloudapi.UpdateDeploymentRequest{Enabled: &disabled})
	e.deploy("node-multi", multi, cloudapi.AuthNone, "", 0)
	// An adapter-less deployment on the OpenAI-compatible upstream (the mock speaks vLLM's wire format,
	// tool calls included) that does not serve /v1/messages itself: the edge translates.
	_, upKey := e.deploy("node-up", base("up"), cloudapi.AuthFixedAPIKey, "", 0)
	// A simulated reasoning model, for thinking through the Messages translation.
	e.deploy("node-think", base("sim-think"), cloudapi.AuthNone, "", 0)
	// A key limited to 3 requests a minute.
	limited, limitedKey := e.deploy("node-limited", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.limitKey(limited.ID, core.RateLimitsChange{RequestsPerMinute: limit(3)})
	// A key limited to 2 requests a minute, for feedback.test.mjs alone: its call and its feedback.
	fbLimited, fbLimitedKey := e.deploy("node-fb-limited", base("sim-echo"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	e.limitKey(fbLimited.ID, core.RateLimitsChange{RequestsPerMinute: limit(2)})
	// An upstream that serves the Responses API itself: calls are passed through, and the caller gets
	// the upstream's response ids (feedback.test.mjs scores them).
	pass, passKey := e.deploy("node-pass", base("up-responses"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	// The tests switch the mock into failure modes through this control server, and back to how
	// newEnv configured it (serving Messages and Responses itself, which later files rely on).
	defaults := e.mock.Config()
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/rate-limit":
			cfg := defaults
			cfg.FailStatus, cfg.FailHeaders = 429, map[string]string{"Retry-After": "1"}
			cfg.FailBody = `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
			e.mock.Configure(cfg)
		default:
			e.mock.Configure(defaults)
		}
	}))
	defer control.Close()

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "tests/node/")
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"SVC_EDGE_BASE=http://"+e.srv.Addr.String(),
		"SVC_KEY_SLUG=node-key", "SVC_KEY="+key, "SVC_KEY_MODEL=sim-echo",
		"SVC_REVOKED_KEY="+revoked.Plaintext,
		"SVC_DISABLED_SLUG=node-off", "SVC_DISABLED_KEY="+offKey,
		"SVC_LIMITED_SLUG=node-limited", "SVC_LIMITED_KEY="+limitedKey,
		"SVC_FB_LIMITED_SLUG=node-fb-limited", "SVC_FB_LIMITED_KEY="+fbLimitedKey,
		"SVC_UP_SLUG=node-up", "SVC_UP_KEY="+upKey, "SVC_MOCK_CONTROL="+control.URL,
		"SVC_PASS_SLUG=node-pass", "SVC_PASS_KEY="+passKey,
		"SVC_MULTI_SLUG=node-multi", "SVC_PUBLIC_MODELS=sim-echo,sim-lorem,sim-slow,up", "SVC_THINK_SLUG=node-think",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test tests/node/: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("unexpected node output:\n%s", out)
	}
	t.Logf("%s", out)
	// tests/node/feedback.test.mjs scored a run of each surface by the id its SDK returned: the runs keep it.
	scored := map[string]int64{}
	rows, err := e.db.Query(`SELECT feedback_comment, feedback_score FROM runs WHERE deployment_id = ? AND feedback_comment LIKE 'node %'`, dk.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		var s int64
		rows.Scan(&c, &s)
		scored[c] = s
	}
	want := map[string]int64{"node chat": 1, "node chat-stream": -1, "node messages": 0, "node responses": 1}
	if len(scored) != len(want) {
		t.Fatalf("runs scored by the node SDKs: %v, want %v", scored, want)
	}
	for c, s := range want {
		if scored[c] != s {
			t.Errorf("run %q scored %d, want %d", c, scored[c], s)
		}
	}
	passedThroughFeedback(t, e, pass.ID)
	threeChoices(t, e, dk.ID)
}

// threeChoices checks the runs of tests/node/choices.test.mjs: its n = 3 calls, plain and streamed, were
// answered 200 and recorded with their three choices (a streamed one, assembled by the edge, once
// panicked on its second choice and was recorded as a 500).
func threeChoices(t *testing.T, e *env, deploymentID string) {
	t.Helper()
	seen := 0
	for _, run := range e.runs(deploymentID, 1) {
		if !strings.Contains(run["request"].(string), "node n3 three choices") {
			continue
		}
		seen++
		var resp struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		json.Unmarshal([]byte(run["response"].(string)), &resp)
		if run["status"] != "ok" || run["statusCode"] != int64(200) || len(resp.Choices) != 3 {
			t.Errorf("n = 3 run %v: status %v %v, %d choices recorded, want 200 and 3", run["id"], run["status"], run["statusCode"], len(resp.Choices))
			continue
		}
		for i, c := range resp.Choices {
			if c.Message.Content != "node n3 three choices" {
				t.Errorf("n = 3 run %v: choice %d recorded %q", run["id"], i, c.Message.Content)
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d runs of the n = 3 calls, want 2 (plain and streamed)", seen)
	}
}

// passedThroughFeedback checks through the API what feedback.test.mjs did on an endpoint whose upstream
// serves the Responses API: each run keeps the upstream's id its caller got, and the score given on that
// id (the comment names it); the follow-up turns were sent upstream with the earlier turn's id.
func passedThroughFeedback(t *testing.T, e *env, deploymentID string) {
	t.Helper()
	e.runs(deploymentID, 4) // written in batches after the answers
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	page, err := api.ListRuns(ctx, deploymentID, cloudapi.ListRunsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"fresh": 1, "followup": -1, "fresh-stream": 0, "followup-stream": 1}
	byKind := map[string]cloudapi.RunSummary{}
	for _, run := range page.Runs {
		if run.Feedback == nil {
			t.Errorf("run %s (upstream response %q) has no feedback", run.ID, run.UpstreamResponseID)
			continue
		}
		kind, id, _ := strings.Cut(strings.TrimPrefix(run.Feedback.Comment, "node pass "), " ")
		if run.UpstreamResponseID == "" || id != run.UpstreamResponseID {
			t.Errorf("run %s keeps upstream response %q, but its feedback %q was given on %q", run.ID, run.UpstreamResponseID, run.Feedback.Comment, id)
		}
		if s, ok := want[kind]; !ok || run.Feedback.Score != s {
			t.Errorf("run %s (%s): score %d, want %d", run.ID, kind, run.Feedback.Score, s)
		}
		byKind[kind] = run
	}
	if len(page.Runs) != len(want) || len(byKind) != len(want) {
		t.Fatalf("%d runs of kinds %v, want one of each of %v", len(page.Runs), byKind, want)
	}
	for followup, fresh := range map[string]string{"followup": "fresh", "followup-stream": "fresh-stream"} {
		run, err := api.GetRun(ctx, deploymentID, byKind[followup].ID)
		if err != nil {
			t.Fatal(err)
		}
		var req struct {
			Previous string `json:"previous_response_id"`
		}
		json.Unmarshal(run.Request, &req)
		if req.Previous != byKind[fresh].UpstreamResponseID {
			t.Errorf("%s run continued %q, want the %s run's upstream id %q", followup, req.Previous, fresh, byKind[fresh].UpstreamResponseID)
		}
	}
}

// TestCurl calls the edge exactly as the quick-start card tells users to: curl resolves *.localhost
// by itself.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is not installed")
	}
	e := newEnv(t)
	_, key := e.deploy("curl-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	port := e.srv.Addr.String()[strings.LastIndex(e.srv.Addr.String(), ":")+1:]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, curl, "-sS", "--max-time", "20",
		"http://curl-ep.localhost:"+port+"/v1/chat/completions",
		"-H", "Authorization: Bearer "+key,
		"-H", "Content-Type: application/json",
		"-d", `{"model": "anything", "messages": [{"role": "user", "content": "Hello from curl"}]}`,
	).CombinedOutput()
	if err != nil {
		t.Fatalf("curl: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `"content":"Hello from curl"`) || !strings.Contains(string(out), `"model":"sim-echo"`) {
		t.Fatalf("curl answer: %s", out)
	}
}
