-- Rate limits and usage aggregates (docs/API.md, "Rate limits" and "Usage").

-- Limits of a deployment and of each key: NULL is unlimited, otherwise at least 1.
ALTER TABLE deployments ADD COLUMN limit_requests_per_minute INTEGER CHECK (limit_requests_per_minute >= 1);
ALTER TABLE deployments ADD COLUMN limit_tokens_per_minute INTEGER CHECK (limit_tokens_per_minute >= 1);
ALTER TABLE api_keys ADD COLUMN limit_requests_per_minute INTEGER CHECK (limit_requests_per_minute >= 1);
ALTER TABLE api_keys ADD COLUMN limit_tokens_per_minute INTEGER CHECK (limit_tokens_per_minute >= 1);

-- One row per deployment, key ('' for calls without a key) and UTC hour, added to by the run recorder
-- with each batch. No transcripts: kept 400 days whatever the run retention. The latency histogram
-- counts requests per fixed bucket: lat_25 is 0-25 ms, lat_50 is 25-50 ms, ..., lat_inf over 60 s
-- (db.LatencyBoundsMs).
CREATE TABLE usage_hourly (
    deployment_id     TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    key_id            TEXT NOT NULL,
    hour              INTEGER NOT NULL,    -- start of the hour, Unix ms
    requests          INTEGER NOT NULL,
    errors            INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    latency_sum_ms    INTEGER NOT NULL,
    lat_25            INTEGER NOT NULL,
    lat_50            INTEGER NOT NULL,
    lat_100           INTEGER NOT NULL,
    lat_250           INTEGER NOT NULL,
    lat_500           INTEGER NOT NULL,
    lat_1000          INTEGER NOT NULL,
    lat_2500          INTEGER NOT NULL,
    lat_5000          INTEGER NOT NULL,
    lat_10000         INTEGER NOT NULL,
    lat_30000         INTEGER NOT NULL,
    lat_60000         INTEGER NOT NULL,
    lat_inf           INTEGER NOT NULL,
    PRIMARY KEY (deployment_id, key_id, hour)
);
CREATE INDEX usage_hourly_hour ON usage_hourly (hour);
