-- name: EdgeTokenCreate :exec
INSERT INTO edge_tokens (id, name, prefix, hash, created_at) VALUES ($1, $2, $3, $4, $5);

-- name: EdgeTokenGetByHash :one
SELECT * FROM edge_tokens WHERE hash = $1;

-- name: EdgeTokenList :many
SELECT * FROM edge_tokens ORDER BY created_at, id;

-- name: EdgeTokenRevoke :execrows
UPDATE edge_tokens SET revoked_at = sqlc.arg(revoked_at) WHERE name = sqlc.arg(name) AND revoked_at IS NULL;

-- name: EdgeTokenTouch :exec
UPDATE edge_tokens SET last_used_at = sqlc.arg(used_at)
WHERE id = sqlc.arg(id) AND (last_used_at IS NULL OR last_used_at < sqlc.arg(used_at));
