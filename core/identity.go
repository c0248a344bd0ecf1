package core

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// Identity kinds.
const (
	KindAnonymous = "anonymous"
	KindUser      = "user"
)

// Principal is the authenticated caller of the management API.
type Principal struct {
	IdentityID string
	Kind       string
}

// Project is a project the caller may act in.
type Project struct {
	ID      string
	Slug    string
	OrgSlug string
}

// MintAnonymous creates an anonymous identity and returns its bearer token (the only time the
// plaintext exists outside the caller).
func (s *Service) MintAnonymous(ctx context.Context) (*cloudapi.AnonymousToken, error) {
	id := newID("idn")
	token := NewToken()
	hash := HashSecret(token)
	now := ms(s.now())
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		if err := db.Q.IdentityCreate(ctx, tx, dbsqlc.IdentityCreateParams{ID: id, Kind: KindAnonymous, CreatedAt: now}); err != nil {
			return err
		}
		return db.Q.TokenCreate(ctx, tx, dbsqlc.TokenCreateParams{Hash: hash[:], IdentityID: id, Kind: "anonymous", CreatedAt: now})
	})
	if err != nil {
		return nil, err
	}
	return &cloudapi.AnonymousToken{Token: token, Identity: cloudapi.Identity{ID: id, Kind: KindAnonymous}}, nil
}

// IssueToken creates a bearer token of the given kind for an identity (used by sign-in).
func (s *Service) IssueToken(ctx context.Context, identityID, kind string, expiresAtMs int64) (string, error) {
	token := NewToken()
	hash := HashSecret(token)
	exp := sql.NullInt64{Int64: expiresAtMs, Valid: expiresAtMs != 0}
	err := db.Map(db.Q.TokenCreate(ctx, s.db, dbsqlc.TokenCreateParams{Hash: hash[:], IdentityID: identityID, Kind: kind, ExpiresAt: exp, CreatedAt: ms(s.now())}))
	return token, err
}

var errUnauthorized = &Error{Code: CodeUnauthorized, Message: "missing or invalid bearer token; send Authorization: Bearer <token>"}

// Authenticate resolves a bearer token to its principal.
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, errUnauthorized
	}
	hash := HashSecret(token)
	row, err := db.Q.TokenGetByHash(ctx, s.db, hash[:])
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return Principal{}, errUnauthorized
		}
		return Principal{}, err
	}
	if !sameHash(row.Hash, hash) || row.Kind == "refresh" || (row.ExpiresAt.Valid && row.ExpiresAt.Int64 <= ms(s.now())) {
		return Principal{}, errUnauthorized
	}
	return Principal{IdentityID: row.IdentityID, Kind: row.IdentityKind}, nil
}

// AnonymousScope returns the org and project of an anonymous identity, creating them the first time.
func (s *Service) AnonymousScope(ctx context.Context, p Principal) (*cloudapi.Scope, error) {
	if p.Kind != KindAnonymous {
		return nil, errorf(CodeForbidden, "only anonymous identities get an automatic scope; signed-in users create orgs and projects")
	}
	var scope *cloudapi.Scope
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		row, err := db.Q.ProjectFirstForIdentity(ctx, tx, p.IdentityID)
		if err == nil {
			scope = &cloudapi.Scope{OrgSlug: row.OrgSlug, ProjectSlug: row.Slug, ProjectID: row.ID}
			return nil
		}
		if !errors.Is(db.Map(err), db.ErrNotFound) {
			return err
		}
		now := ms(s.now())
		orgID := newID("org")
		// The identity id is random, so an org slug derived from it is unique.
		orgSlug := "anon-" + strings.ToLower(p.IdentityID[len(p.IdentityID)-10:])
		projectID := newID("prj")
		if err := db.Q.OrgCreate(ctx, tx, dbsqlc.OrgCreateParams{ID: orgID, Slug: orgSlug, CreatedAt: now}); err != nil {
			return err
		}
		if err := db.Q.MembershipCreate(ctx, tx, dbsqlc.MembershipCreateParams{IdentityID: p.IdentityID, OrgID: orgID, CreatedAt: now}); err != nil {
			return err
		}
		if err := db.Q.ProjectCreate(ctx, tx, dbsqlc.ProjectCreateParams{ID: projectID, OrgID: orgID, Slug: "default", CreatedAt: now}); err != nil {
			return err
		}
		scope = &cloudapi.Scope{OrgSlug: orgSlug, ProjectSlug: "default", ProjectID: projectID}
		return nil
	})
	return scope, db.Map(err)
}

// Me describes the caller and the orgs and projects it belongs to.
func (s *Service) Me(ctx context.Context, p Principal) (*cloudapi.Me, error) {
	idn, err := db.Q.IdentityGet(ctx, s.db, p.IdentityID)
	if err != nil {
		return nil, db.Map(err)
	}
	me := &cloudapi.Me{Identity: cloudapi.Identity{ID: idn.ID, Kind: idn.Kind, Email: idn.Email.String}, Orgs: []cloudapi.Org{}}
	orgs, err := db.Q.OrgListByIdentity(ctx, s.db, p.IdentityID)
	if err != nil {
		return nil, err
	}
	for _, o := range orgs {
		projects, err := db.Q.ProjectListByOrg(ctx, s.db, o.ID)
		if err != nil {
			return nil, err
		}
		org := cloudapi.Org{Slug: o.Slug, Projects: []cloudapi.Project{}}
		for _, pr := range projects {
			org.Projects = append(org.Projects, cloudapi.Project{ID: pr.ID, Slug: pr.Slug})
		}
		me.Orgs = append(me.Orgs, org)
	}
	return me, nil
}

// Project resolves org and project slugs to a project the principal is a member of. Projects of other
// identities are reported as not found, so that their names do not leak.
func (s *Service) Project(ctx context.Context, p Principal, orgSlug, projectSlug string) (Project, error) {
	row, err := db.Q.ProjectGetForMember(ctx, s.db, dbsqlc.ProjectGetForMemberParams{OrgSlug: orgSlug, ProjectSlug: projectSlug, IdentityID: p.IdentityID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return Project{}, errorf(CodeNotFound, "project %s/%s not found", orgSlug, projectSlug)
		}
		return Project{}, err
	}
	return Project{ID: row.ID, Slug: row.Slug, OrgSlug: row.OrgSlug}, nil
}
