-- What the sign-in server keeps (handlers/oauth), in the database so that replicas share it
-- (docs/DEPLOY.md, "Replicas on PostgreSQL"): authorization codes, by their SHA-256 hash, taken once by
-- whichever replica the token request reaches; and secrets every replica must agree on, made on first
-- use (the sign-in page's session key, on PostgreSQL; one process on SQLite keeps it in --data).
CREATE TABLE signin_codes (
    hash         BLOB PRIMARY KEY,
    identity_id  TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    client_id    TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    challenge    TEXT NOT NULL,
    expires_at   INTEGER NOT NULL
);
CREATE INDEX signin_codes_expires ON signin_codes (expires_at);

CREATE TABLE shared_secrets (
    name       TEXT PRIMARY KEY,
    value      BLOB NOT NULL,
    created_at INTEGER NOT NULL
);
