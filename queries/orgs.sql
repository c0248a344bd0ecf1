-- name: OrgCreate :exec
INSERT INTO orgs (id, slug, created_at) VALUES (?, ?, ?);

-- name: OrgGetBySlug :one
SELECT * FROM orgs WHERE slug = ?;

-- name: MembershipCreate :exec
INSERT INTO memberships (identity_id, org_id, created_at) VALUES (?, ?, ?);

-- name: OrgListByIdentity :many
SELECT orgs.* FROM orgs JOIN memberships ON memberships.org_id = orgs.id
WHERE memberships.identity_id = ? ORDER BY orgs.created_at, orgs.id;

-- name: OrgGetForMember :one
-- The org named by slug, only if the identity is a member of it.
SELECT orgs.* FROM orgs JOIN memberships ON memberships.org_id = orgs.id
WHERE orgs.slug = sqlc.arg(org_slug) AND memberships.identity_id = sqlc.arg(identity_id);
