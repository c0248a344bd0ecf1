package core

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/db/storetest"
)

type testCatalog []edgemodel.ModelInfo

func (c testCatalog) Model(id string) (edgemodel.ModelInfo, bool) {
	for _, m := range c {
		if m.ID == id {
			return m, true
		}
	}
	return edgemodel.ModelInfo{}, false
}
func (c testCatalog) Models() []edgemodel.ModelInfo { return c }

// The tests of core run on SQLite, then on PostgreSQL (storetest.Main).
func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// newTestService returns a Service over a fresh database of the pass's engine with a clock the test
// moves by hand.
func newTestService(t testing.TB) (*Service, *time.Time) {
	t.Helper()
	sqldb := storetest.Open(t)
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := New(Options{
		DB: sqldb, Catalog: testCatalog{{ID: "m", Public: true, Default: true, Adapters: true}},
		URLFor: func(slug string) string { return "http://" + slug + ".localhost" }, Now: func() time.Time { return now },
	})
	return s, &now
}

func anonymousProject(t testing.TB, s *Service) (Principal, Project) {
	t.Helper()
	ctx := context.Background()
	tok, err := s.MintAnonymous(ctx, "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(ctx, tok.Token)
	if err != nil {
		t.Fatal(err)
	}
	scope, err := s.AnonymousScope(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return p, *scope
}

// userProject creates a signed-in user with an org and a project.
func userProject(t *testing.T, s *Service, email string) (Principal, Project) {
	t.Helper()
	ctx := context.Background()
	id, err := s.CreateUser(ctx, email, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	p := Principal{IdentityID: id, Kind: KindUser}
	org := strings.ReplaceAll(strings.Split(email, "@")[0], ".", "-") + "-org"
	if _, err := s.CreateOrg(ctx, p, org); err != nil {
		t.Fatal(err)
	}
	pr, err := s.CreateProject(ctx, p, org, "main")
	if err != nil {
		t.Fatal(err)
	}
	return p, *pr
}

func TestAnonymousOneClickExpiresAfterSevenDays(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.OneClick(ctx, p, pr)
	if err != nil {
		t.Fatal(err)
	}
	*now = now.Add(7*24*time.Hour - time.Minute)
	if _, err := s.EdgeDeployment(ctx, d.Slug); err != nil {
		t.Fatalf("one-click endpoint stopped before 7 days: %v", err)
	}
	*now = now.Add(2 * time.Minute)
	if _, err := s.EdgeDeployment(ctx, d.Slug); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("expired one-click endpoint still served: %v", err)
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetDeployment(ctx, pr, d.ID); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("sweeper left the expired endpoint: %v", err)
	}
	// An account-owned endpoint never expires.
	up, upr := userProject(t, s, "ann@example.com")
	own, err := s.CreateDeployment(ctx, up, upr, NewDeployment{Slug: "owned", Target: edgemodel.Target{Kind: "multi_model"}})
	if err != nil || own.ExpiresAt != nil {
		t.Fatalf("owned endpoint: %+v %v", own, err)
	}
}

func TestSweepDeletesOnlyExpiredRuns(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "runs", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	insert := func(id string, expiresAt sql.NullInt64) {
		err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: id, DeploymentID: d.ID, Model: "m", Status: "ok", LatencyMs: 1,
			PromptTokens: 1, CompletionTokens: 1, CreatedAt: ms(*now), ExpiresAt: expiresAt, Request: "{}", Response: "{}"})
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("run_past", sql.NullInt64{Int64: ms(now.Add(-time.Second)), Valid: true})
	insert("run_future", sql.NullInt64{Int64: ms(now.Add(time.Hour)), Valid: true})
	insert("run_unlimited", sql.NullInt64{})
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListRuns(ctx, pr, d.ID, RunFilter{}, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range page.Items {
		ids = append(ids, r.ID)
	}
	if len(ids) != 2 || ids[0] != "run_unlimited" || ids[1] != "run_future" {
		t.Fatalf("runs after sweep: %v", ids)
	}
}

func TestRunPagesWalkEveryRunOnce(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "paged", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	// Seven runs, several sharing a timestamp, so that the cursor must break ties by id.
	for i := 0; i < 7; i++ {
		err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: "run_" + string(rune('a'+i)), DeploymentID: d.ID, Model: "m", Status: "ok",
			LatencyMs: 1, PromptTokens: 1, CompletionTokens: 1, CreatedAt: ms(*now) + int64(i/3), Request: "{}", Response: "{}"})
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		page, err := s.ListRuns(ctx, pr, d.ID, RunFilter{}, 3, cursor)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range page.Items {
			if seen[r.ID] {
				t.Fatalf("run %s listed twice", r.ID)
			}
			seen[r.ID] = true
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 7 || pages != 3 {
		t.Fatalf("saw %d runs in %d pages", len(seen), pages)
	}
	if _, err := s.ListRuns(ctx, pr, d.ID, RunFilter{}, 3, "garbage"); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
		t.Fatalf("bad cursor: %v", err)
	}
}
