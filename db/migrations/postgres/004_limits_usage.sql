-- PostgreSQL dialect of sqlite/004_limits_usage.sql.
ALTER TABLE deployments ADD COLUMN limit_requests_per_minute BIGINT CHECK (limit_requests_per_minute >= 1);
ALTER TABLE deployments ADD COLUMN limit_tokens_per_minute BIGINT CHECK (limit_tokens_per_minute >= 1);
ALTER TABLE api_keys ADD COLUMN limit_requests_per_minute BIGINT CHECK (limit_requests_per_minute >= 1);
ALTER TABLE api_keys ADD COLUMN limit_tokens_per_minute BIGINT CHECK (limit_tokens_per_minute >= 1);

CREATE TABLE usage_hourly (
    deployment_id     TEXT NOT NULL REFERENCES deployments (id) ON DELETE CASCADE,
    key_id            TEXT NOT NULL,
    hour              BIGINT NOT NULL,
    requests          BIGINT NOT NULL,
    errors            BIGINT NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    latency_sum_ms    BIGINT NOT NULL,
    lat_25            BIGINT NOT NULL,
    lat_50            BIGINT NOT NULL,
    lat_100           BIGINT NOT NULL,
    lat_250           BIGINT NOT NULL,
    lat_500           BIGINT NOT NULL,
    lat_1000          BIGINT NOT NULL,
    lat_2500          BIGINT NOT NULL,
    lat_5000          BIGINT NOT NULL,
    lat_10000         BIGINT NOT NULL,
    lat_30000         BIGINT NOT NULL,
    lat_60000         BIGINT NOT NULL,
    lat_inf           BIGINT NOT NULL,
    PRIMARY KEY (deployment_id, key_id, hour)
);
CREATE INDEX usage_hourly_hour ON usage_hourly (hour);
