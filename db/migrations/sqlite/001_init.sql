-- Identities, their bearer tokens, and the orgs and projects they belong to.
-- Times are Unix milliseconds (UTC); booleans are 0/1.
CREATE TABLE identities (
    id            TEXT PRIMARY KEY,
    kind          TEXT NOT NULL CHECK (kind IN ('anonymous', 'user')),
    email         TEXT UNIQUE,
    password_hash TEXT,
    created_at    INTEGER NOT NULL
);

CREATE TABLE tokens (
    hash        BLOB PRIMARY KEY,          -- SHA-256 of the token; the plaintext is never stored
    identity_id TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL CHECK (kind IN ('anonymous', 'access', 'refresh')),
    expires_at  INTEGER,
    created_at  INTEGER NOT NULL
);

CREATE TABLE orgs (
    id         TEXT PRIMARY KEY,
    slug       TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE projects (
    id         TEXT PRIMARY KEY,
    org_id     TEXT NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    slug       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (org_id, slug)
);

CREATE TABLE memberships (
    identity_id TEXT NOT NULL REFERENCES identities (id) ON DELETE CASCADE,
    org_id      TEXT NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (identity_id, org_id)
);

-- Training jobs register their checkpoints and final adapter here; deployments target them.
CREATE TABLE jobs (
    id            TEXT PRIMARY KEY,        -- UUID
    project_id    TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    base_model    TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    final_adapter TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX jobs_project ON jobs (project_id, created_at);

CREATE TABLE job_checkpoints (
    job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    step       INTEGER NOT NULL,
    artifact   TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, step)
);

-- A deleted deployment whose run history is too large to drop at once keeps its row (deleted_at set)
-- and so keeps its slug reserved until the sweeper has drained the runs.
CREATE TABLE deployments (
    id                 TEXT PRIMARY KEY,
    slug               TEXT NOT NULL UNIQUE,
    project_id         TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    target_kind        TEXT NOT NULL CHECK (target_kind IN ('final_adapter', 'checkpoint', 'base_model', 'multi_model')),
    target_job_id      TEXT,
    target_step        INTEGER,
    target_model       TEXT,
    auth_mode          TEXT NOT NULL CHECK (auth_mode IN ('fixed_api_key', 'none')),
    enabled            BOOLEAN NOT NULL,
    custom_domain      TEXT,               -- reserved for a future feature
    run_retention_mode TEXT NOT NULL CHECK (run_retention_mode IN ('days', 'unlimited', 'none')),
    run_retention_days INTEGER NOT NULL,
    anonymous          BOOLEAN NOT NULL,
    expires_at         INTEGER,
    deleted_at         INTEGER,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
);
CREATE INDEX deployments_project ON deployments (project_id, created_at);

CREATE TABLE api_keys (
    id            TEXT PRIMARY KEY,
    deployment_id TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    label         TEXT NOT NULL,
    prefix        TEXT NOT NULL,
    hash          BLOB NOT NULL UNIQUE,    -- SHA-256 of the plaintext
    enabled       BOOLEAN NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER,
    revoked_at    INTEGER
);
-- Labels are unique among the enabled keys of one deployment; revoked keys free their label.
CREATE UNIQUE INDEX api_keys_enabled_label ON api_keys (deployment_id, label) WHERE enabled;

CREATE TABLE runs (
    id                TEXT PRIMARY KEY,
    deployment_id     TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    key_id            TEXT,
    model             TEXT NOT NULL,
    status            TEXT NOT NULL,
    latency_ms        INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    expires_at        INTEGER,             -- fixed when written; NULL keeps it until deleted
    request           TEXT NOT NULL,
    response          TEXT NOT NULL
);
CREATE INDEX runs_deployment ON runs (deployment_id, created_at DESC, id DESC);
CREATE INDEX runs_expires ON runs (expires_at) WHERE expires_at IS NOT NULL;
