package core

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

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

// MintAnonymous creates an anonymous identity for a client at addr (a clientip key) and returns its
// bearer token, the only time the plaintext exists outside the caller. Mints are limited per address.
func (s *Service) MintAnonymous(ctx context.Context, addr string) (*AnonymousToken, error) {
	if err := s.allowMint(addr); err != nil {
		return nil, err
	}
	id := newID("idn")
	token := NewToken()
	hash := HashSecret(token)
	now := ms(s.now())
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		if err := s.q.IdentityCreate(ctx, tx, dbsqlc.IdentityCreateParams{ID: id, Kind: KindAnonymous, CreatedAt: now}); err != nil {
			return err
		}
		if err := s.q.IdentityTouch(ctx, tx, dbsqlc.IdentityTouchParams{UsedAt: sql.NullInt64{Int64: now, Valid: true}, ID: id}); err != nil {
			return err
		}
		return s.q.TokenCreate(ctx, tx, dbsqlc.TokenCreateParams{Hash: hash[:], IdentityID: id, Kind: "anonymous", CreatedAt: now})
	})
	if err != nil {
		return nil, err
	}
	return &AnonymousToken{Token: token, IdentityID: id}, nil
}

// IssueToken creates a bearer token of the given kind for an identity (used by sign-in).
func (s *Service) IssueToken(ctx context.Context, identityID, kind string, expiresAtMs int64) (string, error) {
	token := NewToken()
	hash := HashSecret(token)
	exp := sql.NullInt64{Int64: expiresAtMs, Valid: expiresAtMs != 0}
	err := db.Map(s.q.TokenCreate(ctx, s.db, dbsqlc.TokenCreateParams{Hash: hash[:], IdentityID: identityID, Kind: kind, ExpiresAt: exp, CreatedAt: ms(s.now())}))
	return token, err
}

var errUnauthorized = &edgemodel.Error{Code: edgemodel.CodeUnauthorized, Message: "missing or invalid bearer token; send Authorization: Bearer <token>"}

// touchEvery is how stale an identity's last_used_at may get before a request writes it again: the
// sweeper measures idleness in days, so one write an hour is plenty.
const touchEvery = time.Hour

// Authenticate resolves a bearer token to its principal.
func (s *Service) Authenticate(ctx context.Context, token string) (Principal, error) {
	row, err := s.tokenRow(ctx, s.db, token)
	if err != nil {
		return Principal{}, err
	}
	now := ms(s.now())
	if !row.IdentityLastUsedAt.Valid || now-row.IdentityLastUsedAt.Int64 >= touchEvery.Milliseconds() {
		err := s.q.IdentityTouch(ctx, s.db, dbsqlc.IdentityTouchParams{UsedAt: sql.NullInt64{Int64: now, Valid: true}, ID: row.IdentityID})
		if err != nil {
			s.log.Warn("recording identity use failed", "err", err)
		}
	}
	return Principal{IdentityID: row.IdentityID, Kind: row.IdentityKind}, nil
}

// tokenRow looks up a live bearer token (anonymous or access, not refresh, not expired).
func (s *Service) tokenRow(ctx context.Context, q dbsqlc.DBTX, token string) (dbsqlc.TokenGetByHashRow, error) {
	if token == "" {
		return dbsqlc.TokenGetByHashRow{}, errUnauthorized
	}
	hash := HashSecret(token)
	row, err := s.q.TokenGetByHash(ctx, q, hash[:])
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return row, errUnauthorized
		}
		return row, err
	}
	if !sameHash(row.Hash, hash) || row.Kind == tokenRefresh || (row.ExpiresAt.Valid && row.ExpiresAt.Int64 <= ms(s.now())) {
		return row, errUnauthorized
	}
	return row, nil
}

// ClaimAnonymous hands what an anonymous identity made to the signed-in caller: its orgs become the
// caller's, its live endpoints stop expiring, and the anonymous identity is deleted with its token.
// It returns the anonymous identity's project (nil when it never had one) and how many endpoints were
// kept.
func (s *Service) ClaimAnonymous(ctx context.Context, p Principal, anonymousToken string) (*Project, int, error) {
	if p.Kind != KindUser {
		return nil, 0, errorf(edgemodel.CodeForbidden, "only a signed-in user can claim an anonymous identity; sign in with `svc login` first")
	}
	var scope *Project
	kept := 0
	err := s.changeForEdges(ctx, func(tx edgeTx) error {
		row, err := s.tokenRow(ctx, tx, anonymousToken)
		if err != nil || row.IdentityKind != KindAnonymous {
			if err != nil && edgemodel.CodeOf(err) == "" {
				return err
			}
			return errorf(edgemodel.CodeInvalidRequest, "anonymousToken is not a live anonymous token (it may have been claimed already)")
		}
		first, err := s.q.ProjectFirstForIdentity(ctx, tx, row.IdentityID)
		if err = db.Map(err); err == nil {
			scope = &Project{ID: first.ID, Slug: first.Slug, OrgSlug: first.OrgSlug}
		} else if !errors.Is(err, db.ErrNotFound) {
			return err
		}
		orgs, err := s.q.OrgListIDsByIdentity(ctx, tx, row.IdentityID)
		if err != nil {
			return err
		}
		now := ms(s.now())
		for _, org := range orgs {
			if err := s.q.MembershipEnsure(ctx, tx, dbsqlc.MembershipEnsureParams{IdentityID: p.IdentityID, OrgID: org, CreatedAt: now}); err != nil {
				return err
			}
			n, err := s.q.DeploymentKeepForOrg(ctx, tx, dbsqlc.DeploymentKeepForOrgParams{Now: now, OrgID: org})
			if err != nil {
				return err
			}
			if err := tx.changedOrg(ctx, org); err != nil {
				return err
			}
			kept += int(n)
		}
		// Deleting the identity deletes its token and memberships (foreign keys cascade).
		return s.q.IdentityDelete(ctx, tx, row.IdentityID)
	})
	if err != nil {
		return nil, 0, err
	}
	return scope, kept, nil
}

// AnonymousScope returns the org and project of an anonymous identity, creating them the first time.
func (s *Service) AnonymousScope(ctx context.Context, p Principal) (*Project, error) {
	if p.Kind != KindAnonymous {
		return nil, errorf(edgemodel.CodeForbidden, "only anonymous identities get an automatic scope; signed-in users create orgs and projects")
	}
	var scope *Project
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		row, err := s.q.ProjectFirstForIdentity(ctx, tx, p.IdentityID)
		if err == nil {
			scope = &Project{OrgSlug: row.OrgSlug, Slug: row.Slug, ID: row.ID}
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
		if err := s.q.OrgCreate(ctx, tx, dbsqlc.OrgCreateParams{ID: orgID, Slug: orgSlug, CreatedAt: now}); err != nil {
			return err
		}
		if err := s.q.MembershipCreate(ctx, tx, dbsqlc.MembershipCreateParams{IdentityID: p.IdentityID, OrgID: orgID, CreatedAt: now}); err != nil {
			return err
		}
		if err := s.q.ProjectCreate(ctx, tx, dbsqlc.ProjectCreateParams{ID: projectID, OrgID: orgID, Slug: "default", CreatedAt: now}); err != nil {
			return err
		}
		scope = &Project{OrgSlug: orgSlug, Slug: "default", ID: projectID}
		return nil
	})
	return scope, db.Map(err)
}

// Me describes the caller and the orgs and projects it belongs to.
func (s *Service) Me(ctx context.Context, p Principal) (*Me, error) {
	idn, err := s.q.IdentityGet(ctx, s.db, p.IdentityID)
	if err != nil {
		return nil, db.Map(err)
	}
	me := &Me{Identity: Identity{ID: idn.ID, Kind: idn.Kind, Email: idn.Email.String}, Orgs: []Org{}}
	orgs, err := s.q.OrgListByIdentity(ctx, s.db, p.IdentityID)
	if err != nil {
		return nil, err
	}
	for _, o := range orgs {
		projects, err := s.q.ProjectListByOrg(ctx, s.db, o.ID)
		if err != nil {
			return nil, err
		}
		org := Org{Slug: o.Slug, Projects: []Project{}}
		for _, pr := range projects {
			org.Projects = append(org.Projects, Project{ID: pr.ID, Slug: pr.Slug, OrgSlug: o.Slug})
		}
		me.Orgs = append(me.Orgs, org)
	}
	return me, nil
}

// Project resolves org and project slugs to a project the principal is a member of. Projects of other
// identities are reported as not found, so that their names do not leak.
func (s *Service) Project(ctx context.Context, p Principal, orgSlug, projectSlug string) (Project, error) {
	row, err := s.q.ProjectGetForMember(ctx, s.db, dbsqlc.ProjectGetForMemberParams{OrgSlug: orgSlug, ProjectSlug: projectSlug, IdentityID: p.IdentityID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return Project{}, errorf(edgemodel.CodeNotFound, "project %s/%s not found", orgSlug, projectSlug)
		}
		return Project{}, err
	}
	return Project{ID: row.ID, Slug: row.Slug, OrgSlug: row.OrgSlug}, nil
}
