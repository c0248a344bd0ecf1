-- name: IdentityCreate :exec
INSERT INTO identities (id, kind, email, password_hash, created_at) VALUES (?, ?, ?, ?, ?);

-- name: IdentityGet :one
SELECT * FROM identities WHERE id = ?;

-- name: IdentityGetByEmail :one
SELECT * FROM identities WHERE email = ?;

-- name: IdentityTouch :exec
UPDATE identities SET last_used_at = sqlc.arg(used_at) WHERE id = sqlc.arg(id);

-- name: IdentityDelete :exec
DELETE FROM identities WHERE id = ?;

-- name: IdentityListStaleAnonymous :many
-- Anonymous identities unused since idle_before whose orgs hold no deployment at all (the sweeper
-- deletes expired deployments and drains deleted ones first).
SELECT i.id FROM identities AS i
WHERE i.kind = 'anonymous' AND coalesce(i.last_used_at, i.created_at) < sqlc.arg(idle_before)
  AND NOT EXISTS (
    SELECT 1 FROM memberships AS m
    JOIN projects AS p ON p.org_id = m.org_id
    JOIN deployments AS d ON d.project_id = p.id
    WHERE m.identity_id = i.id)
LIMIT sqlc.arg(lim);
