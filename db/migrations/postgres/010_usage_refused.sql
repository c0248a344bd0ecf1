-- PostgreSQL dialect of sqlite/010_usage_refused.sql.
ALTER TABLE usage_hourly ADD COLUMN refused_401 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN refused_404 BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN refused_429 BIGINT NOT NULL DEFAULT 0;
