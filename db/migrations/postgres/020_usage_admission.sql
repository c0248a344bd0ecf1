-- PostgreSQL dialect of sqlite/020_usage_admission.sql.
ALTER TABLE usage_hourly ADD COLUMN refused_busy BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN refused_budget BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN queued BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN queue_ms_sum BIGINT NOT NULL DEFAULT 0;
