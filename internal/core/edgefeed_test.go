package core

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"
)

// feedSince returns the slugs of the changes after pos and the new position.
func feedSince(t *testing.T, s *Service, pos int64) ([]string, int64) {
	t.Helper()
	changes, _, reset, err := s.EdgeChangesAfter(context.Background(), pos, 1000)
	if err != nil || reset {
		t.Fatalf("changes after %d: reset=%v err=%v", pos, reset, err)
	}
	var slugs []string
	for _, c := range changes {
		slugs = append(slugs, c.Slug)
		pos = c.ID
	}
	return slugs, pos
}

// TestEdgeFeedNamesEveryChangeThatAffectsAnEdge walks through each change an edge process must hear of
// and checks that it, and only it, wrote a feed row naming the right slug, in its own transaction.
func TestEdgeFeedNamesEveryChangeThatAffectsAnEdge(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	pos := int64(0)
	expect := func(what string, want ...string) {
		t.Helper()
		var got []string
		got, pos = feedSince(t, s, pos)
		if len(got) != len(want) {
			t.Fatalf("%s: feed names %q, want %q", what, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: feed names %q, want %q", what, got, want)
			}
		}
	}

	signal := s.EdgeChangeSignal()
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "alpha", Target: edgemodel.Target{Kind: edgemodel.TargetMultiModel}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-signal:
	default:
		t.Fatal("a change did not wake the feed's followers")
	}
	expect("create", "alpha")
	k, err := s.IssueKey(ctx, pr, d.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	expect("issue key", "alpha")
	if _, err := s.IssueKey(ctx, pr, d.ID, "ci"); edgemodel.CodeOf(err) != edgemodel.CodeLabelTaken {
		t.Fatalf("duplicate label: %v", err)
	}
	expect("refused issue (its transaction rolled back)")

	snap, err := s.EdgeSnapshot(ctx, "alpha")
	if err != nil || snap.Deployment == nil || len(snap.Keys) != 1 || snap.Keys[0].Hash != HashSecret(k.Plaintext) || snap.ChangeID != pos {
		t.Fatalf("snapshot %+v %v (feed at %d)", snap, err, pos)
	}
	if key, ok := edgemodel.EdgeKeyMatch(snap.Keys, k.Plaintext); !ok || key.ID != k.Key.ID {
		t.Fatal("the snapshot's hashes do not check the key")
	}
	if _, ok := edgemodel.EdgeKeyMatch(snap.Keys, k.Plaintext+"x"); ok {
		t.Fatal("a wrong key matched")
	}

	if _, err := s.RevokeKey(ctx, pr, d.ID, k.Key.ID); err != nil {
		t.Fatal(err)
	}
	expect("revoke", "alpha")
	if snap, _ := s.EdgeSnapshot(ctx, "alpha"); len(snap.Keys) != 0 {
		t.Fatalf("a revoked key is still in the snapshot: %+v", snap.Keys)
	}
	off := false
	if _, err := s.UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	expect("disable", "alpha")
	// A disabled deployment's snapshot says so, with the deployment (for its usage), never as one to serve.
	if snap, err := s.EdgeSnapshot(ctx, "alpha"); err != nil || !snap.Disabled || snap.Deployment == nil || snap.Deployment.ID != d.ID {
		t.Fatalf("a disabled deployment's snapshot: %+v %v", snap, err)
	}

	// A job's final adapter feeds the snapshots of the deployments that serve it.
	status, adapter := JobCompleted, "s3://bucket/adapter"
	job, err := s.CreateJob(ctx, pr, NewJob{BaseModel: "m", Status: &status, FinalAdapter: &adapter})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "tuned", Target: edgemodel.Target{Kind: edgemodel.TargetFinalAdapter, JobID: job.ID}}); err != nil {
		t.Fatal(err)
	}
	expect("create tuned", "tuned")
	other := "s3://bucket/adapter-2"
	if _, err := s.UpdateJob(ctx, pr, job.ID, JobChange{FinalAdapter: &other}); err != nil {
		t.Fatal(err)
	}
	expect("job update", "tuned")

	if err := s.DeleteDeployment(ctx, pr, d.ID); err != nil {
		t.Fatal(err)
	}
	expect("delete", "alpha")

	// Anonymous endpoints expire: the sweeper's delete is a change; the snapshot carried the expiry.
	snap, _ = s.EdgeSnapshot(ctx, "tuned")
	if snap.Deployment == nil || snap.Deployment.ExpiresAt().IsZero() {
		t.Fatalf("an anonymous endpoint's snapshot has no expiry: %+v", snap.Deployment)
	}
	*now = now.Add(AnonymousLifetime + time.Minute)
	if !snap.Deployment.Expired(*now) {
		t.Fatal("the snapshot does not know it expired")
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	expect("expiry", "tuned")

	// Signing in keeps an anonymous identity's endpoints: their snapshots lose the expiry.
	p2, pr2 := anonymousProject(t, s)
	if _, err := s.CreateDeployment(ctx, p2, pr2, NewDeployment{Slug: "kept", Target: edgemodel.Target{Kind: edgemodel.TargetMultiModel}}); err != nil {
		t.Fatal(err)
	}
	expect("create kept", "kept")
	user, _ := userProject(t, s, "owner@example.com")
	claimToken := anonymousTokenOf(t, s, p2)
	if _, _, err := s.ClaimAnonymous(ctx, user, claimToken); err != nil {
		t.Fatal(err)
	}
	expect("claim", "kept")
}

// anonymousTokenOf mints a second token for an anonymous identity, as its credentials file holds one.
func anonymousTokenOf(t *testing.T, s *Service, p Principal) string {
	t.Helper()
	tok, err := s.IssueToken(context.Background(), p.IdentityID, KindAnonymous, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestChangeForEdgesCommitsFeedAndFlushTogether checks the helper every change goes through: a change
// that fails leaves no feed row and wakes no follower; one that commits leaves its rows and wakes them.
func TestChangeForEdgesCommitsFeedAndFlushTogether(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	signal := s.EdgeChangeSignal()
	boom := errors.New("boom")
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		if err := tx.changedSlug(ctx, "ghost"); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the change's own error", err)
	}
	if got, _ := feedSince(t, s, 0); len(got) != 0 {
		t.Fatalf("a failed change left feed rows %q", got)
	}
	select {
	case <-signal:
		t.Fatal("a failed change woke the feed's followers")
	default:
	}
	if err := s.changeForEdges(ctx, func(tx edgeTx) error { return tx.changedSlug(ctx, "real") }); err != nil {
		t.Fatal(err)
	}
	if got, _ := feedSince(t, s, 0); len(got) != 1 || got[0] != "real" {
		t.Fatalf("feed after a committed change = %q, want [real]", got)
	}
	select {
	case <-signal:
	default:
		t.Fatal("a committed change did not wake the feed's followers")
	}
}

// TestEdgeFeedWrittenOnlyByChangeForEdges keeps the rule "one helper for changes edges must see": no
// Go file of the module writes a feed row (the EdgeChangeAdd queries) or flushes the edge cache
// (invalidate) except internal/core/edgefeed.go, where changeForEdges and its edgeTx live.
func TestEdgeFeedWrittenOnlyByChangeForEdges(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(root, "internal", "core", "edgefeed.go")
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// The generated queries (and the adapter between the engines' sets) define them; they call nothing.
			if name := d.Name(); name == "node_modules" || strings.HasPrefix(name, ".") || path == filepath.Join(root, "db", "dbsqlc") ||
				path == filepath.Join(root, "db", "dbpg") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || path == allowed || path == filepath.Join(root, "db", "pgquerier_gen.go") {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if name := sel.Sel.Name; strings.HasPrefix(name, "EdgeChangeAdd") || name == "invalidate" {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s calls %s: changes that edges must see go through core's changeForEdges", rel, name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("scanned %d Go files; is the module root %s?", files, root)
	}
}

func TestEdgeFeedPositionsAndPruning(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := userProject(t, s, "feed@example.com") // its endpoints never expire, so the sweep changes nothing
	for _, slug := range []string{"one", "two", "three"} {
		if _, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: slug, Target: edgemodel.Target{Kind: edgemodel.TargetMultiModel}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(after int64, wantReset bool, wantN int) {
		t.Helper()
		changes, head, reset, err := s.EdgeChangesAfter(ctx, after, 1000)
		if err != nil || reset != wantReset || len(changes) != wantN || head != 3 {
			t.Fatalf("after %d: %d changes, head %d, reset %v, %v; want %d changes, head 3, reset %v", after, len(changes), head, reset, err, wantN, wantReset)
		}
	}
	check(-1, true, 0) // a follower with nothing yet starts from the head
	check(0, false, 3)
	check(2, false, 1)
	check(3, false, 0)
	check(4, true, 0) // a position this feed never had (another database)

	*now = now.Add(EdgeChangeRetention + time.Hour)
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	// Rows 1 and 2 are gone, the newest stays: an old position cannot continue, the head still can.
	check(0, true, 0)
	check(1, true, 0)
	check(2, false, 1)
	check(3, false, 0)
}

func TestEdgeTokens(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	tok, plaintext, err := s.CreateEdgeToken(ctx, "edge-eu-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(plaintext) < len(edgemodel.EdgeTokenPrefix)+43 || plaintext[:len(edgemodel.EdgeTokenPrefix)] != edgemodel.EdgeTokenPrefix || tok.Prefix != plaintext[:len(tok.Prefix)] {
		t.Fatalf("token %q prefix %q", plaintext, tok.Prefix)
	}
	if _, _, err := s.CreateEdgeToken(ctx, "edge-eu-1"); edgemodel.CodeOf(err) != edgemodel.CodeLabelTaken {
		t.Fatalf("a second live token of the same name: %v", err)
	}
	if _, _, err := s.CreateEdgeToken(ctx, "bad name"); edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest {
		t.Fatalf("a name with a space: %v", err)
	}
	if got, err := s.AuthenticateEdge(ctx, plaintext); err != nil || got.Name != "edge-eu-1" {
		t.Fatalf("authenticate: %+v %v", got, err)
	}
	list, err := s.ListEdgeTokens(ctx)
	if err != nil || len(list) != 1 || list[0].LastUsedAt == nil {
		t.Fatalf("list after use: %+v %v", list, err)
	}
	for token, code := range map[string]string{"": edgemodel.CodeUnauthorized, edgemodel.EdgeTokenPrefix + "nope": edgemodel.CodeUnauthorized,
		"svc_at_someaccesstoken": edgemodel.CodeForbidden, "sk-ep-somekey": edgemodel.CodeForbidden} {
		if _, err := s.AuthenticateEdge(ctx, token); edgemodel.CodeOf(err) != code {
			t.Errorf("token %q: %v, want %s", token, err, code)
		}
	}
	if err := s.RevokeEdgeToken(ctx, "edge-eu-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateEdge(ctx, plaintext); edgemodel.CodeOf(err) != edgemodel.CodeUnauthorized {
		t.Fatalf("revoked token: %v", err)
	}
	if err := s.RevokeEdgeToken(ctx, "edge-eu-1"); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("revoking twice: %v", err)
	}
	// The name is free again; the revoked token stays listed.
	if _, _, err := s.CreateEdgeToken(ctx, "edge-eu-1"); err != nil {
		t.Fatal(err)
	}
	list, _ = s.ListEdgeTokens(ctx)
	revoked := 0
	for _, tok := range list {
		if tok.RevokedAt != nil {
			revoked++
		}
	}
	if len(list) != 2 || revoked != 1 {
		t.Fatalf("list: %+v", list)
	}
}
