-- name: IdentityCreate :exec
INSERT INTO identities (id, kind, email, password_hash, created_at) VALUES (?, ?, ?, ?, ?);

-- name: IdentityGet :one
SELECT * FROM identities WHERE id = ?;

-- name: IdentityGetByEmail :one
SELECT * FROM identities WHERE email = ?;
