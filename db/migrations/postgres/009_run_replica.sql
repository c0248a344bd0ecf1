-- PostgreSQL dialect of sqlite/009_run_replica.sql.
ALTER TABLE runs ADD COLUMN replica TEXT NOT NULL DEFAULT '';
