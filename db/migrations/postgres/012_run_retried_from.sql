-- PostgreSQL dialect of sqlite/012_run_retried_from.sql.
ALTER TABLE runs ADD COLUMN retried_from TEXT NOT NULL DEFAULT '';
