package cloudapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Credential kinds.
const (
	KindAnonymous = "anonymous"
	KindOAuth     = "oauth"
)

// Credentials is the content of ~/.svc/credentials.json (docs/API.md, "Local files").
type Credentials struct {
	APIBaseURL   string     `json:"apiBaseUrl"`
	Kind         string     `json:"kind"` // "anonymous" | "oauth"
	Token        string     `json:"token"`
	RefreshToken string     `json:"refreshToken,omitempty"`
	ExpiresAt    *time.Time `json:"expiresAt,omitempty"`
}

// DefaultCredentialsPath is $HOME/.svc/credentials.json.
func DefaultCredentialsPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find the credentials file: %w", err)
	}
	return filepath.Join(home, ".svc", "credentials.json"), nil
}

// StatePath is <projectDir>/.svc/state.json, the project scope of the CLI and the studio.
func StatePath(projectDir string) string {
	return filepath.Join(projectDir, ".svc", "state.json")
}

// LoadCredentials reads a credentials file. A missing file gives an error satisfying
// errors.Is(err, fs.ErrNotExist); a malformed one an error that names the file.
func LoadCredentials(path string) (*Credentials, error) {
	var c Credentials
	if err := readJSON(path, &c); err != nil {
		return nil, err
	}
	if c.Token == "" {
		return nil, fmt.Errorf("credentials file %s has no token; delete it to mint an anonymous one", path)
	}
	return &c, nil
}

// SaveCredentials writes a credentials file readable by its owner only: it holds a bearer token.
func SaveCredentials(path string, c *Credentials) error {
	return writeJSON(path, c, 0o700, 0o600)
}

// LoadState reads a project state file. A missing file gives an error satisfying
// errors.Is(err, fs.ErrNotExist); a malformed one, or one lacking any of the three fields, an error
// that names the file.
func LoadState(path string) (*Scope, error) {
	var s Scope
	if err := readJSON(path, &s); err != nil {
		return nil, err
	}
	var missing []string
	if s.OrgSlug == "" {
		missing = append(missing, "orgSlug")
	}
	if s.ProjectSlug == "" {
		missing = append(missing, "projectSlug")
	}
	if s.ProjectID == "" {
		missing = append(missing, "projectId")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("project state file %s lacks %s; it must hold orgSlug, projectSlug and projectId",
			path, strings.Join(missing, ", "))
	}
	return &s, nil
}

// SaveState writes a project state file. It holds no secret, so it is world-readable.
func SaveState(path string, s *Scope) error {
	return writeJSON(path, s, 0o755, 0o644)
}

// MissingStateError is the error of a signed-in caller without a project state file (docs/API.md,
// "Studio loopback routes"): they
// must write it by hand, because only anonymous scopes are created automatically.
func MissingStateError(path string) *Error {
	return &Error{
		Status: http.StatusBadRequest,
		Code:   CodeMissingState,
		Message: fmt.Sprintf("no project state: signed-in users must write %s by hand, "+
			`as {"orgSlug": "…", "projectSlug": "…", "projectId": "…"} naming a project they belong to, `+
			"or run `svc use --org ORG --project PROJECT` in the project folder", path),
	}
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		// os errors name the path and keep fs.ErrNotExist reachable through errors.Is.
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", path, err)
	}
	return nil
}

// writeJSON replaces path atomically (temp file in the same folder, then rename), so a reader never
// sees half a file and a crash never leaves an empty one.
func writeJSON(path string, v any, dirMode, fileMode fs.FileMode) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	raw = append(raw, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create folder of %s: %w", path, err)
	}
	// CreateTemp makes the file 0600, so a token is never readable by others, even briefly.
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if err := f.Chmod(fileMode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(raw); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Local resolves credentials and project scope from the local files (docs/API.md, "SDK (Go)"), so that the
// CLI and the studio behave the same.
type Local struct {
	APIBaseURL      string // cloud base URL to use when minting
	CredentialsPath string
	StatePath       string
	HTTPClient      *http.Client
}

// Credentials loads the credentials file; when it is missing and mint is true, mints an anonymous
// token at APIBaseURL and saves it (kind anonymous). mint=false + missing → fs.ErrNotExist-wrapped
// error.
//
// Credentials issued by another server than APIBaseURL are treated as missing: a token from another
// server is useless here, and sending it would hand it to a server that did not issue it. With mint,
// they are replaced by an anonymous token of APIBaseURL (there is one credentials file). A file
// without apiBaseUrl, or a Local without APIBaseURL, is taken as matching.
func (l *Local) Credentials(ctx context.Context, mint bool) (*Credentials, error) {
	c, err := LoadCredentials(l.CredentialsPath)
	switch {
	case err == nil && sameBaseURL(c.APIBaseURL, l.APIBaseURL):
		return c, nil
	case err == nil:
		err = fmt.Errorf("credentials in %s are for %s, not %s: %w", l.CredentialsPath, c.APIBaseURL, l.APIBaseURL, fs.ErrNotExist)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	if !mint {
		return nil, err
	}
	if l.APIBaseURL == "" {
		return nil, fmt.Errorf("cannot mint an anonymous token: no API base URL set")
	}
	tok, err := l.client("").MintAnonymous(ctx)
	if err != nil {
		return nil, err
	}
	c = &Credentials{APIBaseURL: l.APIBaseURL, Kind: KindAnonymous, Token: tok.Token}
	if err := SaveCredentials(l.CredentialsPath, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Client returns a client with the credentials but without scope, for unscoped calls. oauth
// credentials that have expired, or expire within a minute, are refreshed first and saved.
func (l *Local) Client(ctx context.Context, mint bool) (*Client, error) {
	c, err := l.Credentials(ctx, mint)
	if err != nil {
		return nil, err
	}
	if c, err = l.fresh(ctx, c); err != nil {
		return nil, err
	}
	return l.clientFor(c), nil
}

// ScopedClient returns a client with the project scope from the state file. Like Client, it
// refreshes oauth credentials that are about to expire. When the state file is
// missing: anonymous credentials → call AnonymousScope, SaveState, continue (lazy creation);
// oauth credentials → MissingStateError(StatePath).
//
// Missing credentials are minted first: an anonymous identity may be created automatically,
// and a call that needs a scope is exactly when the studio would do it. A state file that exists but
// is unusable is never overwritten (someone wrote it) and gives missing_state naming the problem.
func (l *Local) ScopedClient(ctx context.Context) (*Client, error) {
	c, err := l.Credentials(ctx, true)
	if err != nil {
		return nil, err
	}
	if c, err = l.fresh(ctx, c); err != nil {
		return nil, err
	}
	cl := l.clientFor(c)
	s, err := LoadState(l.StatePath)
	switch {
	case err == nil:
		return cl.WithProject(s.OrgSlug, s.ProjectSlug), nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, &Error{Status: http.StatusBadRequest, Code: CodeMissingState, Message: err.Error()}
	}
	if c.Kind != KindAnonymous {
		return nil, MissingStateError(l.StatePath)
	}
	s, err = cl.AnonymousScope(ctx)
	if err != nil {
		return nil, err
	}
	if err := SaveState(l.StatePath, s); err != nil {
		return nil, err
	}
	return cl.WithProject(s.OrgSlug, s.ProjectSlug), nil
}

// HasState reports whether the state file exists (the studio's list route returns [] without any
// upstream call when it does not).
func (l *Local) HasState() bool {
	_, err := os.Stat(l.StatePath)
	return err == nil
}

func (l *Local) client(token string) *Client {
	return &Client{BaseURL: l.APIBaseURL, Token: token, HTTPClient: l.HTTPClient}
}

// clientFor falls back to the file's base URL when the Local names none.
func (l *Local) clientFor(c *Credentials) *Client {
	cl := l.client(c.Token)
	if cl.BaseURL == "" {
		cl.BaseURL = c.APIBaseURL
	}
	return cl
}

// sameBaseURL compares base URLs the way people write them: a trailing slash or the case of the
// scheme and host make no difference.
func sameBaseURL(a, b string) bool {
	if a == "" || b == "" {
		return true
	}
	return strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(b, "/"))
}

// refreshSkew is how long before expiry oauth credentials are refreshed, so that an access token does
// not lapse between this check and the call that uses it.
const refreshSkew = time.Minute

// refreshMu serialises refreshes within a process: refresh tokens rotate, so two goroutines (two
// studio requests) refreshing the same token at once would leave one of them with a refused token.
var refreshMu sync.Mutex

// fresh returns c, or for oauth credentials close to expiry, new credentials obtained with the refresh
// token and saved to the credentials file.
func (l *Local) fresh(ctx context.Context, c *Credentials) (*Credentials, error) {
	if !needsRefresh(c) {
		return c, nil
	}
	base := c.APIBaseURL
	if base == "" {
		base = l.APIBaseURL
	}
	signInAgain := func(why string) *Error {
		return &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
			Message: fmt.Sprintf("the sign-in saved in %s %s; run `svc login --api %s` again", l.CredentialsPath, why, base)}
	}
	if c.RefreshToken == "" {
		return nil, signInAgain("has expired and holds no refresh token")
	}
	refreshMu.Lock()
	defer refreshMu.Unlock()
	// Another goroutine may have refreshed while this one waited for the lock.
	if cur, err := LoadCredentials(l.CredentialsPath); err == nil && cur.Token != c.Token && !needsRefresh(cur) {
		return cur, nil
	}
	tok, err := refreshWith(ctx, l.HTTPClient, base, c.RefreshToken)
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) && ae.Code == CodeInvalidGrant {
			// Another process (a second CLI, the studio) may have rotated the token first and saved
			// the new one.
			if cur, lerr := LoadCredentials(l.CredentialsPath); lerr == nil && cur.RefreshToken != c.RefreshToken && !needsRefresh(cur) {
				return cur, nil
			}
			return nil, signInAgain("has expired or was revoked")
		}
		return nil, err
	}
	nc := tok.Credentials(base, time.Now())
	if err := SaveCredentials(l.CredentialsPath, nc); err != nil {
		return nil, err
	}
	return nc, nil
}

func needsRefresh(c *Credentials) bool {
	return c.Kind == KindOAuth && c.ExpiresAt != nil && time.Until(*c.ExpiresAt) < refreshSkew
}
