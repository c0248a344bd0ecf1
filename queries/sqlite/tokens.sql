-- name: TokenCreate :exec
INSERT INTO tokens (hash, identity_id, kind, expires_at, created_at) VALUES (?, ?, ?, ?, ?);

-- name: TokenGetByHash :one
SELECT tokens.hash, tokens.kind, tokens.expires_at, identities.id AS identity_id, identities.kind AS identity_kind,
       identities.last_used_at AS identity_last_used_at
FROM tokens JOIN identities ON identities.id = tokens.identity_id
WHERE tokens.hash = ?;

-- name: TokenDelete :exec
DELETE FROM tokens WHERE hash = ?;

-- name: TokenDeleteByIdentity :exec
DELETE FROM tokens WHERE identity_id = ?;

-- name: TokenDeleteExpired :execrows
DELETE FROM tokens WHERE hash IN (
    SELECT t.hash FROM tokens AS t WHERE t.expires_at IS NOT NULL AND t.expires_at <= ? LIMIT ?);
