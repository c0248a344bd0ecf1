package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// Budgets on a deployment and on a key: set at create or by an update, read with the period's usage
// and reset, removed with null; bad values are a 400 naming the field, and change nothing.
func TestBudgets(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	req := base("budget-dep")
	req.Budget = &cloudapi.BudgetSet{Tokens: 1_000_000, Period: "month"}
	d := must(c.CreateDeployment(ctx, req))
	now := time.Now().UTC()
	nextMonth := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if b := d.Budget; b == nil || b.Tokens != 1_000_000 || b.Period != "month" || b.Used != 0 || !b.ResetsAt.Equal(nextMonth) {
		t.Fatalf("created with a budget: %+v", d.Budget)
	}
	if got := must(c.GetDeployment(ctx, d.ID)); got.Budget == nil || got.Budget.Tokens != 1_000_000 {
		t.Fatalf("read back: %+v", got.Budget)
	}
	got := must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Budget: cloudapi.SetBudget(5000, "day")}))
	midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	if b := got.Budget; b == nil || b.Tokens != 5000 || b.Period != "day" || !b.ResetsAt.Equal(midnight) {
		t.Fatalf("updated: %+v", got.Budget)
	}
	off := false
	if got = must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off})); got.Budget == nil {
		t.Fatal("another change removed the budget")
	}
	if got = must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Budget: cloudapi.NoBudget()})); got.Budget != nil {
		t.Fatalf("removed: %+v", got.Budget)
	}

	k := must(c.IssueDeploymentKeyWith(ctx, d.ID, cloudapi.IssueKeyRequest{Label: "ci", Budget: &cloudapi.BudgetSet{Tokens: 100, Period: "day"}}))
	if b := k.Key.Budget; b == nil || b.Tokens != 100 || b.Used != 0 || !b.ResetsAt.Equal(midnight) {
		t.Fatalf("issued with a budget: %+v", k.Key.Budget)
	}
	plain := must(c.IssueDeploymentKey(ctx, d.ID, "plain"))
	if plain.Key.Budget != nil {
		t.Fatalf("a key without a budget: %+v", plain.Key.Budget)
	}
	if got := must(c.GetDeploymentKey(ctx, d.ID, k.Key.ID)); got.Budget == nil || got.Budget.Tokens != 100 || got.Label != "ci" {
		t.Fatalf("GET key: %+v", got)
	}
	kk := must(c.UpdateDeploymentKey(ctx, d.ID, plain.Key.ID, cloudapi.UpdateKeyRequest{Budget: cloudapi.SetBudget(7, "month")}))
	if kk.Budget == nil || kk.Budget.Tokens != 7 || kk.Budget.Period != "month" {
		t.Fatalf("key updated: %+v", kk.Budget)
	}
	for _, key := range must(c.ListDeploymentKeys(ctx, d.ID)) {
		if key.Budget == nil {
			t.Errorf("listed key %s without its budget", key.Label)
		}
	}

	for _, bad := range []struct {
		u     cloudapi.BudgetUpdate
		field string
	}{
		{cloudapi.SetBudget(0, "day"), "budget.tokens"},
		{cloudapi.SetBudget(10, "week"), "budget.period"},
		{cloudapi.SetBudget(2_000_000_000_000, "day"), "budget.tokens"},
	} {
		_, err := c.UpdateDeploymentKey(ctx, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Budget: bad.u})
		wantErr(t, err, 400, "invalid_request")
		if !strings.Contains(err.Error(), bad.field) {
			t.Errorf("the error does not name %s: %v", bad.field, err)
		}
		_, err = c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Budget: bad.u})
		wantErr(t, err, 400, "invalid_request")
	}
	if got := must(c.GetDeploymentKey(ctx, d.ID, k.Key.ID)); got.Budget == nil || got.Budget.Tokens != 100 {
		t.Fatalf("a refused update changed the budget: %+v", got.Budget)
	}
	_, err := c.IssueDeploymentKeyWith(ctx, d.ID, cloudapi.IssueKeyRequest{Label: "bad", Budget: &cloudapi.BudgetSet{Tokens: 5, Period: "year"}})
	wantErr(t, err, 400, "invalid_request")
	if keys := must(c.ListDeploymentKeys(ctx, d.ID)); len(keys) != 2 {
		t.Fatalf("a refused issue made a key: %d keys", len(keys))
	}

	for body, want := range map[string]string{
		`{"budget": {"tokens": "5", "period": "day"}}`:       `field \"budget.tokens\" must be a whole number`,
		`{"budget": {"tokens": 5}}`:                          `field \"budget.period\" is required`,
		`{"budget": {"tokens": 5, "period": "day", "x": 1}}`: `field \"budget.x\" is not a field`,
		`{"budget": 5}`: `field \"budget\" must be an object`,
	} {
		status, out := e.raw(c, http.MethodPatch, "/deployments/"+d.ID+"/keys/"+k.Key.ID, body)
		if status != 400 || !strings.Contains(out, want) || !strings.Contains(out, `"invalid_request"`) {
			t.Errorf("%s: HTTP %d %s", body, status, out)
		}
	}
	if status, out := e.raw(c, http.MethodPatch, "/deployments/"+d.ID+"/keys/"+k.Key.ID, `{"budget": null}`); status != 200 ||
		!strings.Contains(out, `"budget":null`) {
		t.Fatalf("budget null: HTTP %d %s", status, out)
	}
	_, err = c.GetDeploymentKey(ctx, d.ID, "key_nope")
	wantErr(t, err, 404, "not_found")
	_, err = e.user().GetDeploymentKey(ctx, d.ID, k.Key.ID)
	wantErr(t, err, 404, "not_found")
}

// A deployment's queueTimeoutMs and a key's weight: set, read, cleared (the model's), refused out of
// range with a 400 naming the field.
func TestAdmissionSettings(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.user()
	req := base("queue-dep")
	ms := 5000
	req.QueueTimeoutMs = &ms
	d := must(c.CreateDeployment(ctx, req))
	if d.QueueTimeoutMs == nil || *d.QueueTimeoutMs != 5000 {
		t.Fatalf("created: %v", d.QueueTimeoutMs)
	}
	got := must(c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{QueueTimeoutMs: cloudapi.LimitTo(250)}))
	if got.QueueTimeoutMs == nil || *got.QueueTimeoutMs != 250 {
		t.Fatalf("updated: %v", got.QueueTimeoutMs)
	}
	for _, bad := range []int{0, 600_001} {
		_, err := c.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{QueueTimeoutMs: cloudapi.LimitTo(bad)})
		wantErr(t, err, 400, "invalid_request")
		if !strings.Contains(err.Error(), "queueTimeoutMs") {
			t.Errorf("the error does not name queueTimeoutMs: %v", err)
		}
	}
	if status, out := e.raw(c, http.MethodPatch, "/deployments/"+d.ID, `{"queueTimeoutMs": null}`); status != 200 || !strings.Contains(out, `"queueTimeoutMs":null`) {
		t.Fatalf("queueTimeoutMs null: HTTP %d %s", status, out)
	}

	k := must(c.IssueDeploymentKeyWith(ctx, d.ID, cloudapi.IssueKeyRequest{Label: "heavy", Weight: 3}))
	if k.Key.Weight != 3 {
		t.Fatalf("issued weight %d", k.Key.Weight)
	}
	if plain := must(c.IssueDeploymentKey(ctx, d.ID, "plain")); plain.Key.Weight != 1 {
		t.Fatalf("default weight %d, want 1", plain.Key.Weight)
	}
	w := 7
	if got := must(c.UpdateDeploymentKey(ctx, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Weight: &w})); got.Weight != 7 {
		t.Fatalf("updated weight %d", got.Weight)
	}
	for _, bad := range []int{0, 101} {
		_, err := c.UpdateDeploymentKey(ctx, d.ID, k.Key.ID, cloudapi.UpdateKeyRequest{Weight: &bad})
		wantErr(t, err, 400, "invalid_request")
		if !strings.Contains(err.Error(), "weight") {
			t.Errorf("the error does not name weight: %v", err)
		}
	}
	if got := must(c.GetDeploymentKey(ctx, d.ID, k.Key.ID)); got.Weight != 7 {
		t.Fatalf("a refused update changed the weight: %d", got.Weight)
	}
}
