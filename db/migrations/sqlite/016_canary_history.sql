-- Percentiles that tell arms apart, and canaries with an id and a history (docs/API.md, "Usage",
-- "Canary" and "Usage by arm").

-- Each canary a deployment had: its target, percent and mode (the last set), when and by whom it
-- started, and when, by whom and how it ended (outcome '' while it runs, else 'promoted', 'ended', or
-- 'replaced' by a canary of another target or mode). The deployment names the one that runs.
CREATE TABLE canaries (
    id            TEXT PRIMARY KEY,
    deployment_id TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    job_id        TEXT,
    step          INTEGER,
    model         TEXT,
    percent       INTEGER NOT NULL,
    mode          TEXT NOT NULL,
    started_at    INTEGER NOT NULL,
    started_by    TEXT NOT NULL DEFAULT '',
    ended_at      INTEGER,
    ended_by      TEXT NOT NULL DEFAULT '',
    outcome       TEXT NOT NULL DEFAULT '' CHECK (outcome IN ('', 'promoted', 'ended', 'replaced'))
);
CREATE INDEX canaries_deployment ON canaries (deployment_id, started_at);
ALTER TABLE deployments ADD COLUMN canary_id TEXT;
ALTER TABLE deployments ADD COLUMN canary_started_at INTEGER;

-- A canary running at the upgrade starts its history (and its compare) there.
INSERT INTO canaries (id, deployment_id, kind, job_id, step, model, percent, mode, started_at)
SELECT 'cny_' || id, id, canary_kind, canary_job_id, canary_step, canary_model, canary_percent, canary_mode,
       CAST(strftime('%s', 'now') AS INTEGER) * 1000
FROM deployments WHERE canary_kind IS NOT NULL;
UPDATE deployments SET canary_id = 'cny_' || id, canary_started_at = (SELECT started_at FROM canaries WHERE canaries.id = 'cny_' || deployments.id)
WHERE canary_kind IS NOT NULL;

-- The canary a run's arm belongs to ('' without one).
ALTER TABLE runs ADD COLUMN canary_id TEXT NOT NULL DEFAULT '';

-- Latency sketches (internal/qsketch: log buckets, 1% relative accuracy) of the calls answered, merged
-- by the recorder into each row. NULL in rows written before this migration, whose percentiles are
-- estimated from the lat_* histogram.
ALTER TABLE usage_hourly ADD COLUMN latency_sketch BLOB;

-- usage_arm_hourly is keyed by canary too, so that a canary's compare counts its own calls only; rows
-- written before this migration belong to no canary ('').
CREATE TABLE usage_arm_hourly_016 (
    deployment_id     TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    canary_id         TEXT NOT NULL,
    arm               TEXT NOT NULL,
    arm_target        TEXT NOT NULL,
    hour              INTEGER NOT NULL,
    requests          INTEGER NOT NULL,
    errors            INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    lat_25 INTEGER NOT NULL, lat_50 INTEGER NOT NULL, lat_100 INTEGER NOT NULL, lat_250 INTEGER NOT NULL,
    lat_500 INTEGER NOT NULL, lat_1000 INTEGER NOT NULL, lat_2500 INTEGER NOT NULL, lat_5000 INTEGER NOT NULL,
    lat_10000 INTEGER NOT NULL, lat_30000 INTEGER NOT NULL, lat_60000 INTEGER NOT NULL, lat_inf INTEGER NOT NULL,
    ttft_25 INTEGER NOT NULL, ttft_50 INTEGER NOT NULL, ttft_100 INTEGER NOT NULL, ttft_250 INTEGER NOT NULL,
    ttft_500 INTEGER NOT NULL, ttft_1000 INTEGER NOT NULL, ttft_2500 INTEGER NOT NULL, ttft_5000 INTEGER NOT NULL,
    ttft_10000 INTEGER NOT NULL, ttft_30000 INTEGER NOT NULL, ttft_60000 INTEGER NOT NULL, ttft_inf INTEGER NOT NULL,
    feedback_up       INTEGER NOT NULL DEFAULT 0,
    feedback_down     INTEGER NOT NULL DEFAULT 0,
    feedback_neutral  INTEGER NOT NULL DEFAULT 0,
    latency_sketch    BLOB,
    ttft_sketch       BLOB,
    PRIMARY KEY (deployment_id, canary_id, arm, arm_target, hour)
);
INSERT INTO usage_arm_hourly_016 (
    deployment_id, canary_id, arm, arm_target, hour, requests, errors, prompt_tokens, completion_tokens,
    lat_25, lat_50, lat_100, lat_250, lat_500, lat_1000, lat_2500, lat_5000, lat_10000, lat_30000, lat_60000, lat_inf,
    ttft_25, ttft_50, ttft_100, ttft_250, ttft_500, ttft_1000, ttft_2500, ttft_5000, ttft_10000, ttft_30000, ttft_60000, ttft_inf,
    feedback_up, feedback_down, feedback_neutral)
SELECT deployment_id, '', arm, arm_target, hour, requests, errors, prompt_tokens, completion_tokens,
    lat_25, lat_50, lat_100, lat_250, lat_500, lat_1000, lat_2500, lat_5000, lat_10000, lat_30000, lat_60000, lat_inf,
    ttft_25, ttft_50, ttft_100, ttft_250, ttft_500, ttft_1000, ttft_2500, ttft_5000, ttft_10000, ttft_30000, ttft_60000, ttft_inf,
    feedback_up, feedback_down, feedback_neutral
FROM usage_arm_hourly;
DROP TABLE usage_arm_hourly;
ALTER TABLE usage_arm_hourly_016 RENAME TO usage_arm_hourly;
CREATE INDEX usage_arm_hourly_hour ON usage_arm_hourly (hour);
