-- name: SignInCodeCreate :exec
INSERT INTO signin_codes (hash, identity_id, client_id, redirect_uri, challenge, expires_at) VALUES ($1, $2, $3, $4, $5, $6);

-- name: SignInCodeTake :one
-- A code works once: the statement that reads it deletes it, so two replicas cannot both take it.
DELETE FROM signin_codes WHERE hash = $1 RETURNING identity_id, client_id, redirect_uri, challenge, expires_at;

-- name: SignInCodeDeleteExpired :execrows
DELETE FROM signin_codes WHERE expires_at <= $1;

-- name: SharedSecretAdd :exec
-- The first replica's value wins; the others read it.
INSERT INTO shared_secrets (name, value, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING;

-- name: SharedSecretGet :one
SELECT value FROM shared_secrets WHERE name = $1;
