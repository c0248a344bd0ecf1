package core

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/storetest"
)

// replicaServices returns n Services on one fresh PostgreSQL database, each on its own handle, as n
// replicas of svc server are, with FollowReplicas and RunSweeper running until the test ends or the
// replica's stop is called.
func replicaServices(t *testing.T, n int) ([]*Service, []func()) {
	t.Helper()
	url := storetest.PostgresOnly(t).NewDatabase(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	out, stops := make([]*Service, n), make([]func(), n)
	for i := range out {
		sqldb, err := db.OpenPostgres(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		s := New(Options{DB: sqldb, Logger: quiet, Catalog: testCatalog{{ID: "m", Public: true, Default: true}},
			URLFor: func(slug string) string { return "http://" + slug + ".localhost" }})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		go func() { s.FollowReplicas(ctx); done <- struct{}{} }()
		go func() { s.RunSweeper(ctx, 50*time.Millisecond); done <- struct{}{} }()
		var once sync.Once
		stops[i] = func() {
			once.Do(func() {
				cancel()
				<-done
				<-done
				sqldb.Close()
			})
		}
		t.Cleanup(stops[i])
		out[i] = s
	}
	return out, stops
}

// eventually polls cond every 10 ms until it holds, failing after limit; it returns how long it took.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not after %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// A change made through one replica reaches the edge cache of another within a second (and wakes the
// change feeds it streams to edges), although nothing flushed it in that process.
func TestChangesThroughOneReplicaReachTheOthersEdgeCache(t *testing.T) {
	r, _ := replicaServices(t, 2)
	ctx := context.Background()
	p, pr := anonymousProject(t, r[0])
	d, err := r[0].CreateDeployment(ctx, p, pr, NewDeployment{Slug: "shared", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	k, err := r[0].IssueKey(ctx, pr, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	// Replica 1 caches the deployment and the key, once it has seen the changes above (so that what
	// flushes its cache below is the revoke). Its follower keeps the head it saw to itself: this waits
	// past one poll of the feed on purpose.
	time.Sleep(ReplicaPoll + 200*time.Millisecond)
	signal := r[1].EdgeChangeSignal()
	ed, err := r[1].EdgeDeployment(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r[1].EdgeAuthorize(ctx, ed, k.Plaintext); err != nil {
		t.Fatal(err)
	}

	if _, err := r[0].RevokeKey(ctx, pr, d.ID, k.Key.ID); err != nil {
		t.Fatal(err)
	}
	took := eventually(t, time.Second, "the revoke reaches the other replica", func() bool {
		ed, err := r[1].EdgeDeployment(ctx, "shared")
		if err != nil {
			return false
		}
		_, err = r[1].EdgeAuthorize(ctx, ed, k.Plaintext)
		return edgemodel.CodeOf(err) == edgemodel.CodeUnauthorized
	})
	t.Logf("revoke seen by the other replica after %v", took)
	select {
	case <-signal:
	case <-time.After(time.Second):
		t.Fatal("the other replica's feed followers were not woken")
	}

	off := false
	if _, err := r[0].UpdateDeployment(ctx, pr, d.ID, DeploymentChange{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Second, "the disable reaches the other replica", func() bool {
		_, err := r[1].EdgeDeployment(ctx, "shared")
		return edgemodel.CodeOf(err) == edgemodel.CodeNotFound
	})
}

// The sweeper runs on one replica at a time, and moves when its replica stops.
func TestTheSweeperRunsOnOneReplicaAtATime(t *testing.T) {
	r, stops := replicaServices(t, 2)
	leader := func() int {
		who := -1
		eventually(t, 5*time.Second, "one replica leads", func() bool {
			n := 0
			for i, s := range r {
				if s.Leading() {
					who, n = i, n+1
				}
			}
			if n > 1 {
				t.Fatal("two replicas sweep at once")
			}
			return n == 1
		})
		return who
	}
	first := leader()
	// The leader stops (a replica shut down or upgraded); db's tests kill a leader's connection.
	stops[first]()
	took := eventually(t, 5*time.Second, "the other replica takes over", func() bool { return r[1-first].Leading() })
	t.Logf("the sweeper moved after %v", took)
}

// Sign-in works across replicas: a code issued through one is taken through another, and they sign
// the sign-in page's cookies with one key.
func TestSignInStateIsSharedByReplicas(t *testing.T) {
	r, _ := replicaServices(t, 2)
	ctx := context.Background()
	p, _ := anonymousProject(t, r[0])
	if err := r[0].SaveSignInCode(ctx, "code", SignInCode{IdentityID: p.IdentityID, ClientID: "c", RedirectURI: "u", Challenge: "x",
		ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if g, ok, err := r[1].TakeSignInCode(ctx, "code"); err != nil || !ok || g.IdentityID != p.IdentityID {
		t.Fatalf("the other replica could not take the code: %+v %v %v", g, ok, err)
	}
	if _, ok, _ := r[0].TakeSignInCode(ctx, "code"); ok {
		t.Fatal("the code worked twice, once per replica")
	}
	a, err := r[0].SharedSecret(ctx, "signin_session_key", 64)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r[1].SharedSecret(ctx, "signin_session_key", 64)
	if err != nil || string(a) != string(b) {
		t.Fatalf("replicas sign cookies with different keys (%v)", err)
	}
}
