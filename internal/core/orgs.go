package core

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// anonOrgPrefix starts the slugs of anonymous orgs (AnonymousScope); users may not take such slugs,
// or an anonymous identity's first scope could collide with theirs.
const anonOrgPrefix = "anon-"

func forbidAnonymous(p Principal, what string) error {
	if p.Kind != KindUser {
		return errorf(edgemodel.CodeForbidden, "anonymous identities cannot create %s; sign in with `svc login` first", what)
	}
	return nil
}

// CreateOrg creates an org for a signed-in user, who becomes its member. Org slugs follow the rules
// of deployment slugs and are unique across the service.
func (s *Service) CreateOrg(ctx context.Context, p Principal, slug string) (*Org, error) {
	if err := forbidAnonymous(p, "orgs"); err != nil {
		return nil, err
	}
	if err := ValidateSlug(slug); err != nil {
		return nil, err
	}
	if strings.HasPrefix(slug, anonOrgPrefix) {
		return nil, errorf(edgemodel.CodeReservedSlug, "org slugs starting with %q are reserved for anonymous projects; choose another", anonOrgPrefix)
	}
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		now := ms(s.now())
		id := newID("org")
		if err := s.q.OrgCreate(ctx, tx, dbsqlc.OrgCreateParams{ID: id, Slug: slug, CreatedAt: now}); err != nil {
			if db.UniqueOn(db.Map(err), "orgs.slug") {
				return errorf(edgemodel.CodeSlugTaken, "org %q already exists; choose another slug", slug)
			}
			return err
		}
		return s.q.MembershipCreate(ctx, tx, dbsqlc.MembershipCreateParams{IdentityID: p.IdentityID, OrgID: id, CreatedAt: now})
	})
	if err != nil {
		return nil, db.Map(err)
	}
	return &Org{Slug: slug, Projects: []Project{}}, nil
}

// CreateProject creates a project in an org the signed-in user is a member of. Orgs of others are
// reported as not found, so that their names do not leak.
func (s *Service) CreateProject(ctx context.Context, p Principal, orgSlug, slug string) (*Project, error) {
	if err := forbidAnonymous(p, "projects"); err != nil {
		return nil, err
	}
	org, err := s.q.OrgGetForMember(ctx, s.db, dbsqlc.OrgGetForMemberParams{OrgSlug: orgSlug, IdentityID: p.IdentityID})
	if err = db.Map(err); err != nil {
		if errors.Is(err, db.ErrNotFound) {
			return nil, errorf(edgemodel.CodeNotFound, "org %s not found", orgSlug)
		}
		return nil, err
	}
	if err := ValidateSlug(slug); err != nil {
		return nil, err
	}
	id := newID("prj")
	err = db.Map(s.q.ProjectCreate(ctx, s.db, dbsqlc.ProjectCreateParams{ID: id, OrgID: org.ID, Slug: slug, CreatedAt: ms(s.now())}))
	if db.UniqueOn(err, "projects.") {
		return nil, errorf(edgemodel.CodeSlugTaken, "org %s already has a project %q; choose another slug", orgSlug, slug)
	}
	if err != nil {
		return nil, err
	}
	return &Project{ID: id, Slug: slug, OrgSlug: orgSlug}, nil
}
