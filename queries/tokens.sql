-- name: TokenCreate :exec
INSERT INTO tokens (hash, identity_id, kind, expires_at, created_at) VALUES (?, ?, ?, ?, ?);

-- name: TokenGetByHash :one
SELECT tokens.hash, tokens.kind, tokens.expires_at, identities.id AS identity_id, identities.kind AS identity_kind
FROM tokens JOIN identities ON identities.id = tokens.identity_id
WHERE tokens.hash = ?;

-- name: TokenDelete :exec
DELETE FROM tokens WHERE hash = ?;
