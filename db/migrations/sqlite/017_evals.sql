-- Replay evals and the promotion gate (docs/API.md, "Evals").

-- An eval: the candidate target its deployment's stored runs are replayed against, the baseline
-- target those runs were answered by (at creation), the run filter, the optional judge, its state
-- (queued, running, done, failed, canceled), the summary once done (JSON, evalscore.Summary).
CREATE TABLE evals (
    id             TEXT PRIMARY KEY,
    deployment_id  TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    state          TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'canceled')),
    candidate      TEXT NOT NULL, -- JSON target
    baseline       TEXT NOT NULL, -- JSON target
    filter         TEXT NOT NULL, -- JSON {since, until, arm, status, minScore, limit}
    judge_model    TEXT NOT NULL DEFAULT '',
    judge_rubric   TEXT NOT NULL DEFAULT '',
    concurrency    INTEGER NOT NULL,
    total          INTEGER NOT NULL DEFAULT 0,
    summary        TEXT,
    error          TEXT NOT NULL DEFAULT '',
    created_by     TEXT NOT NULL DEFAULT '',
    created_at     INTEGER NOT NULL,
    started_at     INTEGER,
    finished_at    INTEGER
);
CREATE INDEX evals_deployment ON evals (deployment_id, created_at);
CREATE INDEX evals_open ON evals (state) WHERE state IN ('queued', 'running');

-- One work item per source run: taken by a control-plane replica until its lease ends (claimed_by,
-- lease_until), then done with the eval run's id, the checks and the verdict (JSON), or failed with
-- why. The unique index makes a run replayed once per eval.
CREATE TABLE eval_items (
    eval_id       TEXT NOT NULL REFERENCES evals (id) ON DELETE CASCADE,
    source_run_id TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    state         TEXT NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'claimed', 'done', 'failed')),
    claimed_by    TEXT NOT NULL DEFAULT '',
    lease_until   INTEGER NOT NULL DEFAULT 0,
    attempts      INTEGER NOT NULL DEFAULT 0,
    eval_run_id   TEXT NOT NULL DEFAULT '',
    result        TEXT, -- JSON EvalResult without the answers
    error         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (eval_id, source_run_id)
);
CREATE INDEX eval_items_claim ON eval_items (eval_id, state, lease_until);
CREATE INDEX eval_items_seq ON eval_items (eval_id, seq);

-- The deployment's promotion gate: NULL when it has none.
ALTER TABLE deployments ADD COLUMN gate_min_win_rate REAL;
ALTER TABLE deployments ADD COLUMN gate_max_age_hours REAL;

-- A promotion that went past the gate: who, why, when (the canary history shows it).
ALTER TABLE canaries ADD COLUMN override_reason TEXT NOT NULL DEFAULT '';

-- An eval's run: the eval it belongs to and the source run it replays ('' for every other run).
ALTER TABLE runs ADD COLUMN eval_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN eval_of TEXT NOT NULL DEFAULT '';
