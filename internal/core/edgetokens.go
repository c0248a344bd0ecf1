package core

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// Edge tokens let svc edge processes use the internal API (docs/DEPLOY.md, "Edge tokens"). They are
// made on the control-plane host (`svc edge-tokens create`), stored hashed like keys, and reach
// nothing but the internal API; no management token or key reaches it.

// edgeTokenDisplayLen is how much of an edge token's plaintext is kept for display.
const edgeTokenDisplayLen = len(edgemodel.EdgeTokenPrefix) + 4

// edgeTokenTouchEvery bounds the writes of an edge token's lastUsedAt: an edge calls often.
const edgeTokenTouchEvery = time.Minute

// EdgeToken is an edge token as listed; the plaintext is shown once, by CreateEdgeToken.
type EdgeToken struct {
	ID         string
	Name       string
	Prefix     string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

func edgeTokenOut(r dbsqlc.EdgeToken) EdgeToken {
	return EdgeToken{ID: r.ID, Name: r.Name, Prefix: r.Prefix, CreatedAt: fromMs(r.CreatedAt),
		LastUsedAt: fromNullMs(r.LastUsedAt), RevokedAt: fromNullMs(r.RevokedAt)}
}

// ValidateEdgeTokenName checks an edge token's name: 1-64 of letters, digits, '.', '_' and '-'.
func ValidateEdgeTokenName(name string) error {
	if name == "" || len(name) > 64 || strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) >= 0 {
		return errorf(edgemodel.CodeInvalidRequest, "an edge token's name is 1 to 64 letters, digits, '.', '_' or '-' (e.g. edge-eu-1)")
	}
	return nil
}

// CreateEdgeToken makes an edge token and returns its plaintext, the only time it is available.
func (s *Service) CreateEdgeToken(ctx context.Context, name string) (EdgeToken, string, error) {
	if err := ValidateEdgeTokenName(name); err != nil {
		return EdgeToken{}, "", err
	}
	plaintext := edgemodel.EdgeTokenPrefix + randomBase62(43)
	hash := HashSecret(plaintext)
	row := dbsqlc.EdgeTokenCreateParams{ID: newID("etk"), Name: name, Prefix: plaintext[:edgeTokenDisplayLen], Hash: hash[:], CreatedAt: ms(s.now())}
	if err := s.q.EdgeTokenCreate(ctx, s.db, row); err != nil {
		if db.UniqueOn(db.Map(err), "edge_tokens.name") {
			return EdgeToken{}, "", errorf(edgemodel.CodeLabelTaken, "a live edge token is already named %q; revoke it first or choose another name", name)
		}
		return EdgeToken{}, "", err
	}
	return EdgeToken{ID: row.ID, Name: name, Prefix: row.Prefix, CreatedAt: fromMs(row.CreatedAt)}, plaintext, nil
}

// ListEdgeTokens returns every edge token, revoked ones included, oldest first.
func (s *Service) ListEdgeTokens(ctx context.Context) ([]EdgeToken, error) {
	rows, err := s.q.EdgeTokenList(ctx, s.db)
	if err != nil {
		return nil, err
	}
	out := make([]EdgeToken, len(rows))
	for i, r := range rows {
		out[i] = edgeTokenOut(r)
	}
	return out, nil
}

// RevokeEdgeToken revokes the live edge token with this name. Edges using it are refused from their
// next call on (a feed stream they hold is cut at its next heartbeat).
func (s *Service) RevokeEdgeToken(ctx context.Context, name string) error {
	n, err := s.q.EdgeTokenRevoke(ctx, s.db, dbsqlc.EdgeTokenRevokeParams{RevokedAt: sql.NullInt64{Int64: ms(s.now()), Valid: true}, Name: name})
	if err != nil {
		return err
	}
	if n == 0 {
		return notFound("live edge token " + name)
	}
	return nil
}

var (
	errEdgeTokenMissing = &edgemodel.Error{Code: edgemodel.CodeUnauthorized, Message: "the internal API needs an edge token: Authorization: Bearer svc-edge-… (svc edge-tokens create on the control-plane host)"}
	errEdgeTokenInvalid = &edgemodel.Error{Code: edgemodel.CodeUnauthorized, Message: "the edge token is unknown or revoked"}
	errNotEdgeToken     = &edgemodel.Error{Code: edgemodel.CodeForbidden, Message: "the internal API answers only edge tokens; management tokens and endpoint keys are refused here"}
)

// AuthenticateEdge resolves the bearer token of an internal API call. A missing, unknown or revoked
// edge token is unauthorized; any other kind of secret is forbidden, whatever it is worth elsewhere.
func (s *Service) AuthenticateEdge(ctx context.Context, token string) (EdgeToken, error) {
	if token == "" {
		return EdgeToken{}, errEdgeTokenMissing
	}
	if !strings.HasPrefix(token, edgemodel.EdgeTokenPrefix) {
		return EdgeToken{}, errNotEdgeToken
	}
	hash := HashSecret(token)
	row, err := s.q.EdgeTokenGetByHash(ctx, s.db, hash[:])
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return EdgeToken{}, errEdgeTokenInvalid
		}
		return EdgeToken{}, err
	}
	if row.RevokedAt.Valid || !sameHash(row.Hash, hash) {
		return EdgeToken{}, errEdgeTokenInvalid
	}
	now := ms(s.now())
	if !row.LastUsedAt.Valid || now-row.LastUsedAt.Int64 >= edgeTokenTouchEvery.Milliseconds() {
		// Best effort, like keys' lastUsedAt: a failed write never refuses the edge.
		if err := s.q.EdgeTokenTouch(ctx, s.db, dbsqlc.EdgeTokenTouchParams{UsedAt: sql.NullInt64{Int64: now, Valid: true}, ID: row.ID}); err != nil {
			s.log.Warn("edge token lastUsedAt not written", "token", row.Name, "err", err)
		}
	}
	return edgeTokenOut(row), nil
}
