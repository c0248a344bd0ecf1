package oauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/svcdev/svc/internal/core"
)

// grant is what an authorization code stands for, and what it is bound to: the token request must
// name the same client and redirect URI and prove the PKCE challenge.
type grant struct {
	identityID  string
	clientID    string
	redirectURI string
	challenge   string // S256 code challenge
}

// codeStore issues and takes authorization codes. They live 60 seconds, in the database (by their
// SHA-256 hash, core.Service.SaveSignInCode), so that the replica the token request reaches need not
// be the one that issued the code (docs/DEPLOY.md, "Replicas on PostgreSQL"); the sweeper deletes
// expired ones.
type codeStore struct {
	svc *core.Service
	now func() time.Time
}

// issue stores g under a fresh code and returns the code.
func (s *codeStore) issue(ctx context.Context, g grant) (string, error) {
	code := randomString(32)
	err := s.svc.SaveSignInCode(ctx, code, core.SignInCode{IdentityID: g.identityID, ClientID: g.clientID,
		RedirectURI: g.redirectURI, Challenge: g.challenge, ExpiresAt: s.now().Add(codeLifetime)})
	return code, err
}

// take returns the grant of a code and forgets it: a code works once, even when the attempt fails,
// so that a leaked code cannot be retried with guessed verifiers.
func (s *codeStore) take(ctx context.Context, code string) (grant, bool, error) {
	g, ok, err := s.svc.TakeSignInCode(ctx, code)
	if err != nil || !ok || !s.now().Before(g.ExpiresAt) {
		return grant{}, false, err
	}
	return grant{identityID: g.IdentityID, clientID: g.ClientID, redirectURI: g.RedirectURI, challenge: g.Challenge}, true, nil
}

// randomString returns n random bytes, base64url-encoded without padding.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on supported platforms (Go 1.24+ crashes instead)
	return base64.RawURLEncoding.EncodeToString(b)
}
