-- name: OrgCreate :exec
INSERT INTO orgs (id, slug, created_at) VALUES ($1, $2, $3);

-- name: OrgGetBySlug :one
SELECT * FROM orgs WHERE slug = $1;

-- name: MembershipCreate :exec
INSERT INTO memberships (identity_id, org_id, created_at) VALUES ($1, $2, $3);

-- name: OrgListByIdentity :many
SELECT orgs.* FROM orgs JOIN memberships ON memberships.org_id = orgs.id
WHERE memberships.identity_id = $1 ORDER BY orgs.created_at, orgs.id;

-- name: OrgGetForMember :one
-- The org named by slug, only if the identity is a member of it.
SELECT orgs.* FROM orgs JOIN memberships ON memberships.org_id = orgs.id
WHERE orgs.slug = sqlc.arg(org_slug) AND memberships.identity_id = sqlc.arg(identity_id);

-- name: OrgListIDsByIdentity :many
SELECT org_id FROM memberships WHERE identity_id = $1 ORDER BY created_at, org_id;

-- name: MembershipEnsure :exec
-- Makes the identity a member of the org, if it is not already (claiming an anonymous org).
INSERT INTO memberships (identity_id, org_id, created_at) VALUES ($1, $2, $3)
ON CONFLICT (identity_id, org_id) DO NOTHING;

-- name: OrgDeleteIfSoleMember :exec
-- Deletes the orgs of an identity of which it is the only member.
DELETE FROM orgs WHERE orgs.id IN (SELECT m.org_id FROM memberships AS m WHERE m.identity_id = sqlc.arg(identity_id))
  AND NOT EXISTS (SELECT 1 FROM memberships AS o WHERE o.org_id = orgs.id AND o.identity_id <> sqlc.arg(identity_id));
