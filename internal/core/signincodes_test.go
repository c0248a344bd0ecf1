package core

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// A sign-in code works once; an expired one is swept.
func TestSignInCodesWorkOnceAndExpire(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, _ := anonymousProject(t, s)
	g := SignInCode{IdentityID: p.IdentityID, ClientID: "svc-cli", RedirectURI: "http://127.0.0.1:1/cb", Challenge: "c", ExpiresAt: now.Add(time.Minute)}
	if err := s.SaveSignInCode(ctx, "code-1", g); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.TakeSignInCode(ctx, "code-1")
	if err != nil || !ok || got.IdentityID != g.IdentityID || got.RedirectURI != g.RedirectURI || !got.ExpiresAt.Equal(g.ExpiresAt) {
		t.Fatalf("take: %+v %v %v, want %+v", got, ok, err, g)
	}
	if _, ok, err := s.TakeSignInCode(ctx, "code-1"); ok || err != nil {
		t.Fatalf("a code taken twice: %v %v", ok, err)
	}
	if _, ok, _ := s.TakeSignInCode(ctx, "never-issued"); ok {
		t.Fatal("an unknown code was taken")
	}
	// Expired codes go with the next sweep.
	if err := s.SaveSignInCode(ctx, "code-2", g); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(2 * time.Minute)
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.TakeSignInCode(ctx, "code-2"); ok {
		t.Fatal("an expired code survived the sweep")
	}
}

func TestSharedSecretIsMadeOnce(t *testing.T) {
	s, _ := newTestService(t)
	ctx := context.Background()
	a, err := s.SharedSecret(ctx, "k", 64)
	if err != nil || len(a) != 64 {
		t.Fatalf("%d bytes, %v", len(a), err)
	}
	b, err := s.SharedSecret(ctx, "k", 64)
	if err != nil || !bytes.Equal(a, b) {
		t.Fatal("the second call made another secret")
	}
	if c, _ := s.SharedSecret(ctx, "other", 64); bytes.Equal(a, c) {
		t.Fatal("two names share one secret")
	}
}
