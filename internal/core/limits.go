package core

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/ratelimit"
)

// Limits on the two doors anyone can knock on: minting anonymous identities, and signing in. They are
// kept in memory, per process, or counted in Redis with --redis (Options.SharedLimits); addresses are the keys the clientip package gives (an IPv6 client is
// one /64).
type Limits struct {
	// MintBurst anonymous identities may be minted at once from one address, then one per MintEvery.
	MintBurst int
	MintEvery time.Duration

	// Sign-in: after SignInFreeFailures wrong passwords for one account (SignInFreeFailuresPerAddress
	// from one address), each further failure doubles the wait before the next attempt, from
	// SignInBaseDelay up to SignInMaxDelay. An account's count is reset by a successful sign-in; both are
	// forgotten after SignInForget without failures.
	SignInFreeFailures           int
	SignInFreeFailuresPerAddress int
	SignInBaseDelay              time.Duration
	SignInMaxDelay               time.Duration
	SignInForget                 time.Duration
}

// DefaultLimits are the limits of `svc server`.
var DefaultLimits = Limits{
	MintBurst: 20, MintEvery: time.Minute,
	SignInFreeFailures: 5, SignInFreeFailuresPerAddress: 20,
	SignInBaseDelay: time.Second, SignInMaxDelay: 15 * time.Minute, SignInForget: time.Hour,
}

type limiters struct {
	mint          ratelimit.KeyBuckets
	signInAccount ratelimit.KeyBackoff
	signInAddress ratelimit.KeyBackoff
}

// newLimiters keeps the limits in this process, or counts them in Redis when shared is set (so that
// every control-plane replica counts the same attempts), with this process's own as the fallback.
func newLimiters(l Limits, now func() time.Time, shared *ratelimit.Redis) limiters {
	mint := ratelimit.NewBuckets(l.MintBurst, l.MintEvery, now)
	account := ratelimit.NewBackoff(l.SignInFreeFailures, l.SignInBaseDelay, l.SignInMaxDelay, l.SignInForget, now)
	address := ratelimit.NewBackoff(l.SignInFreeFailuresPerAddress, l.SignInBaseDelay, l.SignInMaxDelay, l.SignInForget, now)
	if shared == nil {
		return limiters{mint: mint, signInAccount: account, signInAddress: address}
	}
	return limiters{
		mint:          shared.Buckets("mint", l.MintBurst, l.MintEvery, mint),
		signInAccount: shared.Backoff("signin-account", l.SignInFreeFailures, l.SignInBaseDelay, l.SignInMaxDelay, l.SignInForget, account),
		signInAddress: shared.Backoff("signin-address", l.SignInFreeFailuresPerAddress, l.SignInBaseDelay, l.SignInMaxDelay, l.SignInForget, address),
	}
}

func tooManyRequests(what string, wait time.Duration) error {
	// Whole seconds, rounded up: Retry-After carries seconds, and waiting less would be refused again.
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	return &edgemodel.Error{Code: edgemodel.CodeTooManyRequests, RetryAfter: time.Duration(secs) * time.Second,
		Message: fmt.Sprintf("too many %s; try again in %d seconds", what, secs)}
}

// SignIn checks an email and password for a client at addr, within the sign-in limits: refused
// attempts answer a too_many_requests *Error (with RetryAfter) without checking the password. A wrong
// email or password is ErrBadCredentials, whichever was wrong.
func (s *Service) SignIn(ctx context.Context, addr, email, password string) (string, error) {
	account := NormalizeEmail(email)
	if wait := max(s.limits.signInAddress.Wait(addr), s.limits.signInAccount.Wait(account)); wait > 0 {
		return "", tooManyRequests("failed sign-in attempts from this address or for this account", wait)
	}
	id, err := s.CheckPassword(ctx, email, password)
	switch {
	case err == ErrBadCredentials:
		s.limits.signInAddress.Fail(addr)
		s.limits.signInAccount.Fail(account)
	case err == nil:
		s.limits.signInAccount.Reset(account)
	}
	return id, err
}

// allowMint spends one of addr's anonymous mints.
func (s *Service) allowMint(addr string) error {
	if ok, wait := s.limits.mint.Take(addr); !ok {
		return tooManyRequests("anonymous identities minted from this address", wait)
	}
	return nil
}
