-- name: ProjectCreate :exec
INSERT INTO projects (id, org_id, slug, created_at) VALUES ($1, $2, $3, $4);

-- name: ProjectGetForMember :one
-- The project named by org and project slug, only if the identity is a member of its org.
SELECT projects.id, projects.slug, orgs.slug AS org_slug
FROM projects
JOIN orgs ON orgs.id = projects.org_id
JOIN memberships ON memberships.org_id = orgs.id
WHERE orgs.slug = sqlc.arg(org_slug) AND projects.slug = sqlc.arg(project_slug)
  AND memberships.identity_id = sqlc.arg(identity_id);

-- name: ProjectListByOrg :many
SELECT * FROM projects WHERE org_id = $1 ORDER BY created_at, id;

-- name: ProjectFirstForIdentity :one
SELECT projects.id, projects.slug, orgs.slug AS org_slug
FROM projects
JOIN orgs ON orgs.id = projects.org_id
JOIN memberships ON memberships.org_id = orgs.id
WHERE memberships.identity_id = $1
ORDER BY projects.created_at, projects.id
LIMIT 1;
