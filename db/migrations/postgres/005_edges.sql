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

-- Ids are given by the queries that add changes (queries/postgres/edge_changes.sql): the newest plus
-- one, inside svc's transactions, which hold the store's write lock (db.Tx). So they are handed out in
-- the order their transactions commit, and a rolled-back change leaves no gap (as on SQLite, where
-- AUTOINCREMENT does the same); a sequence would do neither, and a follower reading "id > after" could
-- step over a change that committed late. Pruning always keeps the newest row, so ids never go back.
CREATE TABLE edge_changes (
    id         BIGINT PRIMARY KEY,
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
