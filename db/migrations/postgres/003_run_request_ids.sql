-- PostgreSQL dialect of sqlite/003_run_request_ids.sql.
ALTER TABLE runs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN upstream_request_id TEXT NOT NULL DEFAULT '';
