package core

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
)

func TestSignInFailuresGrowADelayPerAccountAndPerAddress(t *testing.T) {
	s, now := newTestService(t)
	s.limits = newLimiters(Limits{MintBurst: 1, MintEvery: time.Minute, SignInFreeFailures: 2, SignInFreeFailuresPerAddress: 3,
		SignInBaseDelay: time.Second, SignInMaxDelay: time.Minute, SignInForget: time.Hour}, func() time.Time { return *now }, nil)
	ctx := context.Background()
	for _, email := range []string{"ann@example.com", "bob@example.com", "cy@example.com"} {
		if _, err := s.CreateUser(ctx, email, "correct horse battery"); err != nil {
			t.Fatal(err)
		}
	}
	retryAfter := func(err error) time.Duration {
		var e *edgemodel.Error
		if !errors.As(err, &e) || e.Code != edgemodel.CodeTooManyRequests {
			t.Fatalf("want too_many_requests, got %v", err)
		}
		return e.RetryAfter
	}

	// Two free failures for ann, then each failure doubles the wait; while waiting even the right
	// password is refused (without being checked).
	for i := 0; i < 2; i++ {
		if _, err := s.SignIn(ctx, "10.0.0.1", "ann@example.com", "wrong"); err != ErrBadCredentials {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	if _, err := s.SignIn(ctx, "10.0.0.2", "Ann@Example.com", "wrong"); err != ErrBadCredentials {
		t.Fatalf("third failure: %v", err)
	}
	if d := retryAfter(signIn(ctx, s, "10.0.0.3", "ann@example.com", "correct horse battery")); d != time.Second {
		t.Fatalf("Retry-After after the first counted failure = %v, want 1s", d)
	}
	*now = now.Add(time.Second)
	if _, err := s.SignIn(ctx, "10.0.0.3", "ann@example.com", "wrong"); err != ErrBadCredentials {
		t.Fatalf("after the wait: %v", err)
	}
	if d := retryAfter(signIn(ctx, s, "10.0.0.3", "ann@example.com", "correct horse battery")); d != 2*time.Second {
		t.Fatalf("Retry-After after the second counted failure = %v, want 2s", d)
	}
	*now = now.Add(2 * time.Second)
	if _, err := s.SignIn(ctx, "10.0.0.3", "ann@example.com", "correct horse battery"); err != nil {
		t.Fatalf("right password after the wait: %v", err)
	}
	// A success resets the account.
	if _, err := s.SignIn(ctx, "10.0.0.4", "ann@example.com", "wrong"); err != ErrBadCredentials {
		t.Fatalf("after a success: %v", err)
	}

	// One address trying many accounts is slowed down too, whichever account it tries next.
	for _, email := range []string{"bob@example.com", "cy@example.com", "nobody@example.com"} {
		if _, err := s.SignIn(ctx, "10.9.9.9", email, "wrong"); err != ErrBadCredentials {
			t.Fatalf("%s: %v", email, err)
		}
	}
	if _, err := s.SignIn(ctx, "10.9.9.9", "dee@example.com", "wrong"); err != ErrBadCredentials {
		t.Fatalf("fourth failure from one address: %v", err)
	}
	retryAfter(signIn(ctx, s, "10.9.9.9", "bob@example.com", "correct horse battery"))
	// Another address is not affected.
	if _, err := s.SignIn(ctx, "10.8.8.8", "bob@example.com", "correct horse battery"); err != nil {
		t.Fatalf("bob from another address: %v", err)
	}
}

func TestSweeperDeletesStaleAnonymousIdentitiesAndExpiredTokens(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	// stale: made an endpoint, which expired and was swept; then nobody used the token for 30 days.
	staleP, stalePr := anonymousProject(t, s)
	if _, err := s.CreateDeployment(ctx, staleP, stalePr, NewDeployment{Slug: "stale", Target: edgemodel.Target{Kind: "multi_model"}}); err != nil {
		t.Fatal(err)
	}
	staleTok := mint(t, s)
	// busy: a live endpoint keeps it, however long unused (the endpoint itself expires first).
	busyP, busyPr := anonymousProject(t, s)
	// active: no endpoint, but its token was used recently.
	activeTok := mint(t, s)
	// Signed-in users' access tokens expire after an hour.
	uid, err := s.CreateUser(ctx, "ann@example.com", "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := s.IssueTokenPair(ctx, uid)
	if err != nil {
		t.Fatal(err)
	}

	*now = now.Add(AnonymousLifetime + time.Minute) // the stale endpoint expired
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(AnonymousIdleLifetime - AnonymousLifetime)
	if _, err := s.Authenticate(ctx, activeTok); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(AnonymousLifetime - time.Hour) // 30 days and more since staleP and busyP were last used
	// busyP's token was not used either, but it holds a live endpoint.
	if _, err := s.CreateDeployment(ctx, busyP, busyPr, NewDeployment{Slug: "busy", Target: edgemodel.Target{Kind: "multi_model"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Authenticate(ctx, staleTok); edgemodel.CodeOf(err) != edgemodel.CodeUnauthorized {
		t.Fatalf("stale anonymous identity survived the sweep: %v", err)
	}
	if _, err := s.Project(ctx, staleP, stalePr.OrgSlug, stalePr.Slug); edgemodel.CodeOf(err) != edgemodel.CodeNotFound {
		t.Fatalf("stale identity's project survived: %v", err)
	}
	if _, err := s.q.OrgGetBySlug(ctx, s.db, stalePr.OrgSlug); !errors.Is(db.Map(err), db.ErrNotFound) {
		t.Fatalf("stale identity's org: %v, want it deleted", err)
	}
	if _, err := s.Project(ctx, busyP, busyPr.OrgSlug, busyPr.Slug); err != nil {
		t.Fatalf("identity with a live endpoint was swept: %v", err)
	}
	if _, err := s.Authenticate(ctx, activeTok); err != nil {
		t.Fatalf("recently used identity was swept: %v", err)
	}
	// The access token expired long ago and is gone from the table; the refresh token (30 days) too.
	for _, tok := range []string{pair.AccessToken, pair.RefreshToken} {
		hash := HashSecret(tok)
		if _, err := s.q.TokenGetByHash(ctx, s.db, hash[:]); !errors.Is(err, sql.ErrNoRows) {
			t.Fatalf("expired token still stored: %v", err)
		}
	}
}

// mint returns the token of a fresh anonymous identity.
func mint(t *testing.T, s *Service) string {
	t.Helper()
	tok, err := s.MintAnonymous(context.Background(), "192.0.2.99")
	if err != nil {
		t.Fatal(err)
	}
	return tok.Token
}

// signIn is SignIn for a call whose error alone matters.
func signIn(ctx context.Context, s *Service, addr, email, password string) error {
	_, err := s.SignIn(ctx, addr, email, password)
	return err
}
