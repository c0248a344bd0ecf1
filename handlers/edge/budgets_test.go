package edge_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/poll"
)

func budget(tokens int64, period string) core.BudgetChange {
	return core.BudgetChange{Set: true, Value: &edgemodel.Budget{Tokens: tokens, Period: period}}
}

// A key's budget admits calls while anything is left, the call that crosses it included; past it every
// surface answers 429 budget_exhausted in its own envelope, with Retry-After at the next UTC midnight
// and the reset in the message. Another key of the endpoint is not touched; removing the budget lets
// the key call again. What the period used is readable on the key.
func TestKeyBudgetExhausted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, key := e.deploy("bud-ep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	other, err := e.srv.Service.IssueKey(ctx, e.pr, d.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := e.srv.Service.ListKeys(ctx, e.pr, d.ID)
	keyID := ""
	for _, k := range keys { // the deployment's own key, not "other" (keys made in one millisecond list in either order)
		if k.Label != "other" {
			keyID = k.ID
		}
	}
	if _, err := e.srv.Service.UpdateKey(ctx, e.pr, d.ID, keyID, core.KeyChange{Budget: budget(50, "day")}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "bud-ep", "/v1/chat/completions", key, chatBody("hi", "max_tokens", 10)); r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}
	long := strings.Repeat("word ", 60) // 60 completion tokens from the echo simulator: past the budget
	if r := e.do("POST", "bud-ep", "/v1/chat/completions", key, chatBody(long, "max_tokens", 100)); r.status != 200 {
		t.Fatalf("the call that crosses the budget: %d %s", r.status, r.body)
	}
	r := e.do("POST", "bud-ep", "/v1/chat/completions", key, chatBody("hi", "max_tokens", 10))
	m := wantError(t, r, 429, "budget_exhausted")
	midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	retry, _ := strconv.Atoi(r.header.Get("Retry-After"))
	if want := int(time.Until(midnight).Seconds()); retry < want-5 || retry > want+5 {
		t.Errorf("Retry-After %q, want about %d (the next UTC midnight)", r.header.Get("Retry-After"), want)
	}
	if msg, _ := m["message"].(string); m["type"] != "rate_limit_error" || !strings.Contains(msg, midnight.Format(time.RFC3339)) ||
		!strings.Contains(msg, "key's token budget (50 tokens a day)") {
		t.Errorf("429: %s", r.body)
	}
	r = e.do("POST", "bud-ep", "/v1/messages", key, map[string]any{"max_tokens": 8, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	var env struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if r.status != 429 || json.Unmarshal(r.body, &env) != nil || env.Type != "error" || env.Error.Type != "rate_limit_error" ||
		!strings.Contains(env.Error.Message, "resets at "+midnight.Format(time.RFC3339)) || r.header.Get("Retry-After") == "" {
		t.Errorf("messages 429: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "bud-ep", "/v1/chat/completions", other.Plaintext, chatBody("hi")); r.status != 200 {
		t.Errorf("another key under no budget: %d %s", r.status, r.body)
	}
	// The recorded usage shows the period's spend: both calls' prompt and completion tokens.
	var got *core.BudgetUsage
	poll.Until(t, 5*time.Second, "the key's budget usage", func() bool {
		k, err := e.srv.Service.GetKey(ctx, e.pr, d.ID, keyID)
		if err != nil {
			t.Fatal(err)
		}
		got = k.Budget
		return got != nil && got.Used > 60
	})
	if got.Tokens != 50 || got.Period != "day" || !got.ResetsAt.Equal(midnight) {
		t.Errorf("budget usage %+v", got)
	}
	if _, err := e.srv.Service.UpdateKey(ctx, e.pr, d.ID, keyID, core.KeyChange{Budget: core.BudgetChange{Set: true}}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "bud-ep", "/v1/chat/completions", key, chatBody("hi")); r.status != 200 {
		t.Errorf("after the budget was removed: %d %s", r.status, r.body)
	}
}

// A deployment's budget is shared by all its keys.
func TestDeploymentBudgetAppliesToEveryKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, key := e.deploy("bud-dep", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	other, err := e.srv.Service.IssueKey(ctx, e.pr, d.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Service.UpdateDeployment(ctx, e.pr, d.ID, core.DeploymentChange{Budget: budget(20, "month")}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "bud-dep", "/v1/chat/completions", key, chatBody(strings.Repeat("word ", 30))); r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}
	r := e.do("POST", "bud-dep", "/v1/chat/completions", other.Plaintext, chatBody("hi"))
	m := wantError(t, r, 429, "budget_exhausted")
	now := time.Now().UTC()
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if msg, _ := m["message"].(string); !strings.Contains(msg, "deployment's token budget (20 tokens a month)") || !strings.Contains(msg, next.Format(time.RFC3339)) {
		t.Errorf("429: %s", r.body)
	}
}

// A budget counted in svc server starts its period from what the store recorded (ratelimit.Budgets.Seed):
// a key that already spent 60 tokens today, before it had a budget (or before a restart), is refused
// at once under a budget of 50, not given the day again.
func TestBudgetStartsFromTheRecordedUsage(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, key := e.deploy("seeded", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	if r := e.do("POST", "seeded", "/v1/chat/completions", key, chatBody(strings.Repeat("word ", 60))); r.status != 200 {
		t.Fatalf("call before the budget: %d %s", r.status, r.body)
	}
	e.srv.Flush()
	keys, _ := e.srv.Service.ListKeys(ctx, e.pr, d.ID)
	if _, err := e.srv.Service.UpdateKey(ctx, e.pr, d.ID, keys[0].ID, core.KeyChange{Budget: budget(50, "day")}); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.do("POST", "seeded", "/v1/chat/completions", key, chatBody("hi")), 429, "budget_exhausted")
}

// A replay eval spends no budget (docs/OPERATIONS.md, "Budgets": a replay is no caller's usage): under a deployment
// budget its callers have spent, the eval still replays every run. Before, each replay reserved its
// tokens, was refused budget_exhausted and failed its item, and a replay cut by the worker's stop or
// by a caller taking its place kept its reservation until the period's end.
func TestReplaysSpendNoBudget(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, key := e.deploy("bud-eval", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	const n = 3
	for i := range n {
		if r := e.do("POST", "bud-eval", "/v1/chat/completions", key, chatBody("question "+strconv.Itoa(i)+strings.Repeat(" word", 30))); r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	e.srv.Flush()
	if _, err := e.srv.Service.UpdateDeployment(ctx, e.pr, d.ID, core.DeploymentChange{Budget: budget(20, "month")}); err != nil {
		t.Fatal(err)
	}
	wantError(t, e.do("POST", "bud-eval", "/v1/chat/completions", key, chatBody("hi")), 429, "budget_exhausted")
	ev, err := e.srv.Service.CreateEval(ctx, e.pr, d.ID, core.NewEval{Candidate: edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: "sim-echo"}}, "idn_test")
	if err != nil {
		t.Fatal(err)
	}
	var got *core.Eval
	poll.Until(t, 30*time.Second, "the eval to end", func() bool {
		got, err = e.srv.Service.GetEval(ctx, e.pr, d.ID, ev.ID)
		return err == nil && (got.State == core.EvalDone || got.State == core.EvalFailed)
	})
	if got.State != core.EvalDone || got.Progress.Done != n || got.Progress.Failed != 0 {
		t.Fatalf("eval %s with %+v, want done with %d replayed and none failed", got.State, got.Progress, n)
	}
}
