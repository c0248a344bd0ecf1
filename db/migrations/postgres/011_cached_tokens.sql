-- PostgreSQL dialect of sqlite/011_cached_tokens.sql.
ALTER TABLE runs ADD COLUMN cached_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN cached_tokens BIGINT NOT NULL DEFAULT 0;
