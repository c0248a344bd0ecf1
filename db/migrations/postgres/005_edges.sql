-- PostgreSQL dialect of sqlite/005_edges.sql, plus the notification that wakes every replica when a
-- change commits (docs/DEPLOY.md).
CREATE TABLE edge_tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    hash         BYTEA NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE UNIQUE INDEX edge_tokens_live_name ON edge_tokens (name) WHERE revoked_at IS NULL;

-- Ids come from an identity, which never goes back after pruning. A sequence alone hands out ids in
-- the order transactions start, not the order they commit, and a follower reading "id > after" could
-- step over a change committed late: the queries that add changes take the store's write lock first
-- (db.WriteLockKey), so that changes commit in the order of their ids.
CREATE TABLE edge_changes (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    slug       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX edge_changes_created ON edge_changes (created_at);

CREATE TABLE edge_batches (
    id         TEXT PRIMARY KEY,
    runs       BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX edge_batches_created ON edge_batches (created_at);

-- NOTIFY is delivered when the transaction commits: the replicas that LISTEN read the table then (it
-- stays the truth; a replica that missed a notification still reads it within a second).
CREATE FUNCTION svc_edge_changes_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('svc_edge_changes', '');
    RETURN NULL;
END;
$$;
CREATE TRIGGER edge_changes_notify AFTER INSERT ON edge_changes
    FOR EACH STATEMENT EXECUTE FUNCTION svc_edge_changes_notify();
