package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// grant is what an authorization code stands for, and what it is bound to: the token request must
// name the same client and redirect URI and prove the PKCE challenge.
type grant struct {
	identityID  string
	clientID    string
	redirectURI string
	challenge   string // S256 code challenge
	expires     time.Time
}

// codeStore keeps authorization codes in memory, by their SHA-256 hash. Codes live 60 seconds and
// serve one process, so a table would buy nothing; a restart merely makes a pending `svc login`
// start over.
type codeStore struct {
	mu    sync.Mutex
	byKey map[[32]byte]grant
	now   func() time.Time
}

func newCodeStore(now func() time.Time) *codeStore {
	return &codeStore{byKey: map[[32]byte]grant{}, now: now}
}

// issue stores g under a fresh code and returns the code.
func (s *codeStore) issue(g grant) string {
	code := randomString(32)
	g.expires = s.now().Add(codeLifetime)
	s.mu.Lock()
	defer s.mu.Unlock()
	// Expired codes are dropped here, so the map stays as small as the codes in flight.
	s.pruneLocked()
	s.byKey[sha256.Sum256([]byte(code))] = g
	return code
}

// prune drops expired codes.
func (s *codeStore) prune() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
}

func (s *codeStore) pruneLocked() {
	now := s.now()
	for k, v := range s.byKey {
		if !now.Before(v.expires) {
			delete(s.byKey, k)
		}
	}
}

// take returns the grant of a code and forgets it: a code works once, even when the attempt fails,
// so that a leaked code cannot be retried with guessed verifiers.
func (s *codeStore) take(code string) (grant, bool) {
	key := sha256.Sum256([]byte(code))
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.byKey[key]
	delete(s.byKey, key)
	if !ok || !s.now().Before(g.expires) {
		return grant{}, false
	}
	return g, true
}

// randomString returns n random bytes, base64url-encoded without padding.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails on supported platforms (Go 1.24+ crashes instead)
	return base64.RawURLEncoding.EncodeToString(b)
}
