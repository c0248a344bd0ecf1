-- PostgreSQL dialect of sqlite/016_canary_history.sql.
CREATE TABLE canaries (
    id            TEXT PRIMARY KEY,
    deployment_id TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    job_id        TEXT,
    step          BIGINT,
    model         TEXT,
    percent       BIGINT NOT NULL,
    mode          TEXT NOT NULL,
    started_at    BIGINT NOT NULL,
    started_by    TEXT NOT NULL DEFAULT '',
    ended_at      BIGINT,
    ended_by      TEXT NOT NULL DEFAULT '',
    outcome       TEXT NOT NULL DEFAULT '' CHECK (outcome IN ('', 'promoted', 'ended', 'replaced'))
);
CREATE INDEX canaries_deployment ON canaries (deployment_id, started_at);
ALTER TABLE deployments ADD COLUMN canary_id TEXT;
ALTER TABLE deployments ADD COLUMN canary_started_at BIGINT;

INSERT INTO canaries (id, deployment_id, kind, job_id, step, model, percent, mode, started_at)
SELECT 'cny_' || id, id, canary_kind, canary_job_id, canary_step, canary_model, canary_percent, canary_mode,
       CAST(extract(epoch FROM now()) * 1000 AS BIGINT)
FROM deployments WHERE canary_kind IS NOT NULL;
UPDATE deployments SET canary_id = 'cny_' || id, canary_started_at = (SELECT started_at FROM canaries WHERE canaries.id = 'cny_' || deployments.id)
WHERE canary_kind IS NOT NULL;

ALTER TABLE runs ADD COLUMN canary_id TEXT NOT NULL DEFAULT '';

ALTER TABLE usage_hourly ADD COLUMN latency_sketch BYTEA;

ALTER TABLE usage_arm_hourly ADD COLUMN canary_id TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_arm_hourly ADD COLUMN latency_sketch BYTEA;
ALTER TABLE usage_arm_hourly ADD COLUMN ttft_sketch BYTEA;
ALTER TABLE usage_arm_hourly DROP CONSTRAINT usage_arm_hourly_pkey;
ALTER TABLE usage_arm_hourly ADD PRIMARY KEY (deployment_id, canary_id, arm, arm_target, hour);
