-- Canaries (docs/API.md, "Canary"): a deployment may send a share of its sessions (split) or a copy of
-- its calls (shadow) to a second target; every run says which arm answered it, and usage is kept per
-- arm beside the per-key rows.

-- The canary's target (the same columns as the deployment's own target), its percent and mode; all NULL
-- when the deployment has no canary.
ALTER TABLE deployments ADD COLUMN canary_kind TEXT CHECK (canary_kind IN ('final_adapter', 'checkpoint', 'base_model'));
ALTER TABLE deployments ADD COLUMN canary_job_id TEXT;
ALTER TABLE deployments ADD COLUMN canary_step INTEGER;
ALTER TABLE deployments ADD COLUMN canary_model TEXT;
ALTER TABLE deployments ADD COLUMN canary_percent INTEGER CHECK (canary_percent BETWEEN 1 AND 99);
ALTER TABLE deployments ADD COLUMN canary_mode TEXT CHECK (canary_mode IN ('split', 'shadow'));

-- Which arm answered a run ('' when the deployment had no canary, else 'primary' or 'canary'), the
-- served model name of that arm's target, the primary run a shadow copy was made of (''), and the time
-- to the first byte of the answer (the first event of a stream, the whole answer otherwise).
ALTER TABLE runs ADD COLUMN arm TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN arm_target TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN shadow_of TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN ttft_ms INTEGER NOT NULL DEFAULT 0;

-- Usage of the calls made while a canary was set, per deployment, arm, the arm's target and UTC hour:
-- the latency and time-to-first-token histograms have db.LatencyBoundsMs's buckets (lat_25 is 0-25 ms,
-- ..., lat_inf over 60 s). Swept with usage_hourly.
CREATE TABLE usage_arm_hourly (
    deployment_id     TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
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
    PRIMARY KEY (deployment_id, arm, arm_target, hour)
);
CREATE INDEX usage_arm_hourly_hour ON usage_arm_hourly (hour);
