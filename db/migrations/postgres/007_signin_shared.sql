-- PostgreSQL dialect of sqlite/006_signin_shared.sql.
CREATE TABLE signin_codes (
    hash         BYTEA PRIMARY KEY,
    identity_id  TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    client_id    TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    challenge    TEXT NOT NULL,
    expires_at   BIGINT NOT NULL
);
CREATE INDEX signin_codes_expires ON signin_codes (expires_at);

CREATE TABLE shared_secrets (
    name       TEXT PRIMARY KEY,
    value      BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
