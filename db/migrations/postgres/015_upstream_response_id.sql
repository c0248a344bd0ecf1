-- PostgreSQL dialect of sqlite/015_upstream_response_id.sql.
ALTER TABLE runs ADD COLUMN upstream_response_id TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_upstream_response ON runs (deployment_id, upstream_response_id) WHERE upstream_response_id <> '';
