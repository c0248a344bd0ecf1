package core

import (
	"context"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// A budget is stored on a deployment and a key (both engines), reaches the edge with the snapshot and
// the key, and reads back with what its current UTC period used: the recorded tokens of the period's
// hours only, a deployment's of every key but svc's copies, a key's of its own.
func TestBudgetStoredAndUsedInPeriod(t *testing.T) {
	s, now := newTestService(t) // 2026-01-01 12:00 UTC
	*now = time.Date(2026, 3, 15, 12, 30, 0, 0, time.UTC)
	ctx := context.Background()
	p, pr := userProject(t, s, "budget@example.com")
	month := &edgemodel.Budget{Tokens: 10_000, Period: "month"}
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "budget", Target: edgemodel.Target{Kind: "base_model", Model: "m"}, Budget: month})
	if err != nil {
		t.Fatal(err)
	}
	day := &edgemodel.Budget{Tokens: 500, Period: "day"}
	k, err := s.IssueKeyWith(ctx, pr, d.ID, NewKey{Label: "k", Budget: day})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := s.IssueKey(ctx, pr, d.ID, "plain")
	add := func(key string, at time.Time, prompt, completion int64) {
		t.Helper()
		if err := s.q.UsageAdd(ctx, s.db, dbsqlc.UsageAddParams{DeploymentID: d.ID, KeyID: key, Hour: at.Truncate(time.Hour).UnixMilli(),
			Requests: 1, PromptTokens: prompt, CompletionTokens: completion}); err != nil {
			t.Fatal(err)
		}
	}
	add(k.Key.ID, time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC), 10, 20)      // today
	add(k.Key.ID, time.Date(2026, 3, 14, 23, 0, 0, 0, time.UTC), 100, 200)   // yesterday: this month, not today
	add(plain.Key.ID, time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 1, 2)     // the month's first hour
	add("~copies", time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC), 1000, 1000) // svc's own copies: not a caller's
	add(k.Key.ID, time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC), 5000, 0)    // last month

	got, err := s.GetDeployment(ctx, pr, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b := got.Budget; b == nil || b.Tokens != 10_000 || b.Period != "month" || b.Used != 333 || !b.ResetsAt.Equal(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("deployment budget %+v, want 333 used of 10000 a month, resetting 2026-04-01", got.Budget)
	}
	key, err := s.GetKey(ctx, pr, d.ID, k.Key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b := key.Budget; b == nil || b.Used != 30 || !b.ResetsAt.Equal(time.Date(2026, 3, 16, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("key budget %+v, want 30 used today, resetting at midnight", key.Budget)
	}
	keys, err := s.ListKeys(ctx, pr, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, kk := range keys {
		if (kk.ID == plain.Key.ID) != (kk.Budget == nil) {
			t.Errorf("listed key %s budget %+v", kk.Label, kk.Budget)
		}
	}
	// The edge sees both budgets: the snapshot for svc edge, the key check for the embedded edge.
	snap, err := s.EdgeSnapshot(ctx, "budget")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Deployment.Budget == nil || *snap.Deployment.Budget != *month {
		t.Fatalf("snapshot budget %+v", snap.Deployment.Budget)
	}
	for _, sk := range snap.Keys {
		if sk.ID == k.Key.ID && (sk.Budget == nil || *sk.Budget != *day) {
			t.Fatalf("snapshot key budget %+v", sk.Budget)
		}
	}
	ek, err := s.EdgeAuthorize(ctx, snap.Deployment, k.Plaintext)
	if err != nil || ek.Budget == nil || *ek.Budget != *day {
		t.Fatalf("edge key %+v %v", ek, err)
	}
	// Removed: none on either.
	if _, err := s.UpdateKey(ctx, pr, d.ID, k.Key.ID, KeyChange{Budget: BudgetChange{Set: true}}); err != nil {
		t.Fatal(err)
	}
	if key, _ = s.GetKey(ctx, pr, d.ID, k.Key.ID); key.Budget != nil {
		t.Fatalf("removed key budget: %+v", key.Budget)
	}
	if got, err = s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Budget: BudgetChange{Set: true, Value: &edgemodel.Budget{Tokens: 0, Period: "day"}}}); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
		t.Fatalf("a zero budget: %v", err)
	}
	if got, _ = s.GetDeployment(ctx, pr, d.ID); got.Budget == nil || got.Budget.Tokens != 10_000 {
		t.Fatalf("a refused change changed the budget: %+v", got.Budget)
	}
}

// A deployment's queueTimeoutMs and a key's weight are stored (both engines) and reach the edge with
// the snapshot and the key check.
func TestAdmissionSettingsReachTheEdge(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	p, pr := userProject(t, s, "queue@example.com")
	ms := 1500
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "queued", Target: edgemodel.Target{Kind: "base_model", Model: "m"}, QueueTimeoutMs: &ms})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.IssueKeyWith(ctx, pr, d.ID, NewKey{Label: "k", Weight: 4})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.EdgeSnapshot(ctx, "queued")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Deployment.QueueTimeout != 1500*time.Millisecond || len(snap.Keys) != 1 || snap.Keys[0].Weight != 4 {
		t.Fatalf("snapshot: queue timeout %v, keys %+v", snap.Deployment.QueueTimeout, snap.Keys)
	}
	if ek, err := s.EdgeAuthorize(ctx, snap.Deployment, k.Plaintext); err != nil || ek.Weight != 4 {
		t.Fatalf("edge key %+v %v", ek, err)
	}
	if _, err := s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{QueueTimeoutMs: LimitChange{Set: true}}); err != nil {
		t.Fatal(err)
	}
	if snap, _ = s.EdgeSnapshot(ctx, "queued"); snap.Deployment.QueueTimeout != 0 {
		t.Fatalf("cleared: %v", snap.Deployment.QueueTimeout)
	}
}

// countingQuerier counts the calls of the queries a test watches, to show a read goes to the store once
// per page rather than once per item.
type countingQuerier struct {
	db.Querier
	calls map[string]int
}

func countQueries(s *Service) *countingQuerier {
	c := &countingQuerier{Querier: s.q, calls: map[string]int{}}
	s.q = c
	return c
}

func (c *countingQuerier) UsageTotalsByDeployment(ctx context.Context, q dbsqlc.DBTX, arg dbsqlc.UsageTotalsByDeploymentParams) ([]dbsqlc.UsageTotalsByDeploymentRow, error) {
	c.calls["UsageTotalsByDeployment"]++
	return c.Querier.UsageTotalsByDeployment(ctx, q, arg)
}

func (c *countingQuerier) UsageListByDeployment(ctx context.Context, q dbsqlc.DBTX, arg dbsqlc.UsageListByDeploymentParams) ([]dbsqlc.UsageListByDeploymentRow, error) {
	c.calls["UsageListByDeployment"]++
	return c.Querier.UsageListByDeployment(ctx, q, arg)
}

func (c *countingQuerier) UsageListByKey(ctx context.Context, q dbsqlc.DBTX, arg dbsqlc.UsageListByKeyParams) ([]dbsqlc.UsageListByKeyRow, error) {
	c.calls["UsageListByKey"]++
	return c.Querier.UsageListByKey(ctx, q, arg)
}

func (c *countingQuerier) UsageTotalsByKey(ctx context.Context, q dbsqlc.DBTX, arg dbsqlc.UsageTotalsByKeyParams) ([]dbsqlc.UsageTotalsByKeyRow, error) {
	c.calls["UsageTotalsByKey"]++
	return c.Querier.UsageTotalsByKey(ctx, q, arg)
}

// A listed page of deployments shows each budget's usage as reading the deployment alone does (both
// engines): its callers' tokens in its own period, svc's copies left out, whatever the other
// deployments of the page use; read with one query per period the page's budgets use.
func TestListedBudgetsAreEachDeploymentsOwn(t *testing.T) {
	s, now := newTestService(t)
	*now = time.Date(2026, 3, 15, 12, 30, 0, 0, time.UTC)
	ctx := context.Background()
	p, pr := userProject(t, s, "budgets@example.com")
	today, yesterday := time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC), time.Date(2026, 3, 14, 23, 0, 0, 0, time.UTC)
	lastMonth := time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC)
	type usage struct {
		key    string
		at     time.Time
		tokens int64
	}
	specs := []struct {
		slug   string
		budget *edgemodel.Budget
		usage  []usage
		want   int64 // -1: no budget
	}{
		{"month-a", &edgemodel.Budget{Tokens: 10_000, Period: "month"},
			[]usage{{"", today, 30}, {"k1", yesterday, 300}, {"~copies", today, 2000}, {"", lastMonth, 5000}}, 330},
		{"day-b", &edgemodel.Budget{Tokens: 500, Period: "day"},
			[]usage{{"", yesterday, 7}, {"k2", today, 40}, {"~copies", today, 999}}, 40},
		{"month-c", &edgemodel.Budget{Tokens: 20, Period: "month"}, nil, 0},
		{"none-d", nil, []usage{{"", today, 50}}, -1},
		{"day-e", &edgemodel.Budget{Tokens: 9, Period: "day"}, []usage{{"~copies", today, 70}}, 0},
		{"month-f", &edgemodel.Budget{Tokens: 100_000, Period: "month"}, []usage{{"k3", yesterday, 11}, {"k4", today, 22}}, 33},
	}
	want := map[string]int64{}
	for _, sp := range specs {
		d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: sp.slug, Target: edgemodel.Target{Kind: "base_model", Model: "m"}, Budget: sp.budget})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range sp.usage {
			if err := s.q.UsageAdd(ctx, s.db, dbsqlc.UsageAddParams{DeploymentID: d.ID, KeyID: u.key, Hour: u.at.UnixMilli(),
				Requests: 1, PromptTokens: u.tokens / 3, CompletionTokens: u.tokens - u.tokens/3}); err != nil {
				t.Fatal(err)
			}
		}
		want[d.ID] = sp.want
		*now = now.Add(time.Second) // a page is newest first: distinct creation times
	}
	*now = time.Date(2026, 3, 15, 12, 30, 0, 0, time.UTC)

	calls := countQueries(s)
	seen, pages, cursor := 0, 0, ""
	for {
		page, err := s.ListDeployments(ctx, pr, 4, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, d := range page.Items {
			seen++
			if w := want[d.ID]; (w < 0) != (d.Budget == nil) || d.Budget != nil && d.Budget.Used != w {
				t.Errorf("listed %s: budget %+v, want used %d", d.Slug, d.Budget, w)
			}
			own, err := s.GetDeployment(ctx, pr, d.ID)
			if err != nil {
				t.Fatal(err)
			}
			if (own.Budget == nil) != (d.Budget == nil) || d.Budget != nil && *d.Budget != *own.Budget {
				t.Errorf("listed %s: budget %+v, read alone %+v", d.Slug, d.Budget, own.Budget)
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if seen != len(specs) || pages != 2 {
		t.Fatalf("listed %d deployments in %d pages, want %d in 2", seen, pages, len(specs))
	}
	// Each page's budgets use a day and a month: two reads a page; a deployment read alone
	// (GetDeployment) is a page of one, one read per budgeted deployment: 4 + 5.
	if n := calls.calls["UsageTotalsByDeployment"]; n != 9 {
		t.Errorf("UsageTotalsByDeployment read %d times, want 9 (a day and a month for each of 2 pages, one for each of 5 budgeted deployments read alone)", n)
	}
	if n := calls.calls["UsageListByDeployment"]; n != 0 {
		t.Errorf("UsageListByDeployment read %d times, want 0 (a deployment's budget is read as a page's)", n)
	}
}

// Reading one key reads that key's usage only (both engines), and nothing for a key without a budget;
// the other keys' usage does not count in it.
func TestKeyReadReadsItsOwnUsage(t *testing.T) {
	s, now := newTestService(t)
	*now = time.Date(2026, 3, 15, 12, 30, 0, 0, time.UTC)
	ctx := context.Background()
	p, pr := userProject(t, s, "keyread@example.com")
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "keyread", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.IssueKeyWith(ctx, pr, d.ID, NewKey{Label: "k", Budget: &edgemodel.Budget{Tokens: 500, Period: "day"}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := s.IssueKey(ctx, pr, d.ID, "plain")
	if err != nil {
		t.Fatal(err)
	}
	for key, tokens := range map[string]int64{k.Key.ID: 30, plain.Key.ID: 400, "~copies": 1000} {
		if err := s.q.UsageAdd(ctx, s.db, dbsqlc.UsageAddParams{DeploymentID: d.ID, KeyID: key, Hour: time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC).UnixMilli(),
			Requests: 1, PromptTokens: tokens}); err != nil {
			t.Fatal(err)
		}
	}
	calls := countQueries(s)
	got, err := s.GetKey(ctx, pr, d.ID, k.Key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Budget == nil || got.Budget.Used != 30 {
		t.Fatalf("key budget %+v, want 30 used", got.Budget)
	}
	if calls.calls["UsageTotalsByKey"] != 0 || calls.calls["UsageListByKey"] != 1 {
		t.Fatalf("reading one key: %v, want one UsageListByKey", calls.calls)
	}
	if got, err = s.GetKey(ctx, pr, d.ID, plain.Key.ID); err != nil || got.Budget != nil {
		t.Fatalf("plain key: %+v %v", got, err)
	}
	if calls.calls["UsageTotalsByKey"] != 0 || calls.calls["UsageListByKey"] != 1 {
		t.Fatalf("reading a key without a budget read its usage: %v", calls.calls)
	}
}

// On the 1st of a month a day budget and a month budget start together and end apart: the keys
// listed each read their own period's usage (the day's alone for the day, the month's for the month).
func TestKeysOnTheFirstReadTheirOwnPeriods(t *testing.T) {
	s, now := newTestService(t)
	*now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	p, pr := userProject(t, s, "first@example.com")
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "first", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	budgets := map[string]edgemodel.Budget{"day": {Tokens: 1000, Period: "day"}, "month": {Tokens: 1000, Period: "month"}}
	ids := map[string]string{}
	for _, label := range []string{"day", "month"} {
		b := budgets[label]
		k, err := s.IssueKeyWith(ctx, pr, d.ID, NewKey{Label: label, Budget: &b})
		if err != nil {
			t.Fatal(err)
		}
		ids[label] = k.Key.ID
		*now = now.Add(time.Second)
	}
	// Each key has 30 tokens this morning and 600 on the 20th: within the month, outside the day.
	for _, id := range ids {
		for _, u := range []struct {
			at     time.Time
			tokens int64
		}{{time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC), 30}, {time.Date(2026, 3, 20, 9, 0, 0, 0, time.UTC), 600}} {
			if err := s.q.UsageAdd(ctx, s.db, dbsqlc.UsageAddParams{DeploymentID: d.ID, KeyID: id, Hour: u.at.UnixMilli(),
				Requests: 1, PromptTokens: u.tokens}); err != nil {
				t.Fatal(err)
			}
		}
	}
	keys, err := s.ListKeys(ctx, pr, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{ids["day"]: 30, ids["month"]: 630}
	for _, k := range keys {
		if k.Budget == nil || k.Budget.Used != want[k.ID] {
			t.Errorf("key %s: budget %+v, want used %d", k.Label, k.Budget, want[k.ID])
		}
	}
}
