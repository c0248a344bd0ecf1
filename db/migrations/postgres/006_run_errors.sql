-- PostgreSQL dialect of sqlite/006_run_errors.sql.
ALTER TABLE runs ADD COLUMN status_code BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN error_code TEXT NOT NULL DEFAULT '';
