package oauth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/svcdev/svc/internal/core"
)

// sessionKeyLen is a 32-byte HMAC key followed by a 32-byte AES key for the session cookie.
const sessionKeyLen = 64

// SessionKey returns the key of the sign-in cookies, kept in <dataDir>/session.key (mode 0600) and
// created with random bytes on first start. Keeping it beside the database means a restart does not
// sign everyone out; deleting the file does.
func SessionKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "session.key")
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key, err = createSessionKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	if len(key) != sessionKeyLen {
		return nil, fmt.Errorf("session key %s holds %d bytes, not %d; delete it to make a new one (this signs everyone out of the sign-in page)", path, len(key), sessionKeyLen)
	}
	return key, nil
}

// SharedSessionKey returns the key of the sign-in cookies of replicas on PostgreSQL, kept in the
// database and made by the first replica that asked: a cookie written by one replica is read by the
// next request's, whichever that is (docs/DEPLOY.md, "Replicas on PostgreSQL").
func SharedSessionKey(ctx context.Context, svc *core.Service) ([]byte, error) {
	key, err := svc.SharedSecret(ctx, "signin_session_key", sessionKeyLen)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	return key, nil
}

func createSessionKey(path string) ([]byte, error) {
	key := make([]byte, sessionKeyLen)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// The key is written to a temporary file (CreateTemp makes it 0600) and then linked into place:
	// the link fails if the file exists, so when two servers start on one data folder at once both end
	// up with the first one's key, and neither ever reads half a file.
	f, err := os.CreateTemp(filepath.Dir(path), ".session.key-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(key); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path)
	} else if err != nil {
		return nil, err
	}
	return key, nil
}
