-- Scale-out (docs/DEPLOY.md): the tokens of `svc edge` processes, the change feed they follow, and the
-- run batches they shipped (so that a batch retried after a lost answer is applied once).

-- Edge tokens reach only the internal API (/internal/v1/edge/). Names are unique among live tokens;
-- a revoked token keeps its row so that `svc edge-tokens list` still shows it.
CREATE TABLE edge_tokens (
    id           TEXT PRIMARY KEY,
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    hash         BLOB NOT NULL UNIQUE,   -- SHA-256 of the plaintext
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE UNIQUE INDEX edge_tokens_live_name ON edge_tokens (name) WHERE revoked_at IS NULL;

-- One row per change that affects what an edge serves, written in the transaction of the change: edges
-- drop the slug's snapshot when they see it. AUTOINCREMENT keeps ids growing even after old rows are
-- pruned, so an edge's "after" position stays meaningful. An empty slug means every slug.
CREATE TABLE edge_changes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    slug       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX edge_changes_created ON edge_changes (created_at);

-- Run batches applied, by the id the edge gave the batch.
CREATE TABLE edge_batches (
    id         TEXT PRIMARY KEY,
    runs       INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX edge_batches_created ON edge_batches (created_at);
