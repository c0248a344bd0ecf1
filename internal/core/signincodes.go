package core

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// SignInCode is what an authorization code of the sign-in server (handlers/oauth) stands for, and
// what it is bound to: the token request must name the same client and redirect URI and prove the
// PKCE challenge. Codes are kept in the database, by their SHA-256 hash, so that the replica that
// takes one need not be the one that issued it.
type SignInCode struct {
	IdentityID  string
	ClientID    string
	RedirectURI string
	Challenge   string // S256 code challenge
	ExpiresAt   time.Time
}

// SaveSignInCode stores the grant of a new code (its plaintext is never stored).
func (s *Service) SaveSignInCode(ctx context.Context, code string, g SignInCode) error {
	hash := sha256.Sum256([]byte(code))
	return s.q.SignInCodeCreate(ctx, s.db, dbsqlc.SignInCodeCreateParams{Hash: hash[:], IdentityID: g.IdentityID,
		ClientID: g.ClientID, RedirectUri: g.RedirectURI, Challenge: g.Challenge, ExpiresAt: ms(g.ExpiresAt)})
}

// TakeSignInCode returns the grant of a code and deletes it in the same statement: a code works once,
// on whichever replica, even when the attempt fails, so that a leaked code cannot be retried with
// guessed verifiers. ok is false for an unknown or used code; the caller checks ExpiresAt.
func (s *Service) TakeSignInCode(ctx context.Context, code string) (g SignInCode, ok bool, err error) {
	hash := sha256.Sum256([]byte(code))
	row, err := s.q.SignInCodeTake(ctx, s.db, hash[:])
	if err = db.Map(err); errors.Is(err, db.ErrNotFound) {
		return SignInCode{}, false, nil
	} else if err != nil {
		return SignInCode{}, false, err
	}
	return SignInCode{IdentityID: row.IdentityID, ClientID: row.ClientID, RedirectURI: row.RedirectUri, Challenge: row.Challenge,
		ExpiresAt: fromMs(row.ExpiresAt)}, true, nil
}

// SharedSecret returns the secret every replica uses under name, n random bytes made by the first
// that asked (the sign-in page's session key on PostgreSQL).
func (s *Service) SharedSecret(ctx context.Context, name string, n int) ([]byte, error) {
	fresh := make([]byte, n)
	_, _ = rand.Read(fresh) // never fails on supported platforms (Go 1.24+ crashes instead)
	if err := s.q.SharedSecretAdd(ctx, s.db, dbsqlc.SharedSecretAddParams{Name: name, Value: fresh, CreatedAt: ms(s.now())}); err != nil {
		return nil, err
	}
	v, err := s.q.SharedSecretGet(ctx, s.db, name)
	if err != nil {
		return nil, err
	}
	if len(v) != n {
		return nil, errors.New("shared secret " + name + " has the wrong length; delete its row to make a new one")
	}
	return v, nil
}
