-- PostgreSQL dialect of sqlite/008_run_trace_id.sql.
ALTER TABLE runs ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
