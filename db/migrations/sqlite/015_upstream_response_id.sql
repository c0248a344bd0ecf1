-- The upstream's id of a passed-through Responses answer (docs/API.md, "Feedback"): the caller got it,
-- and gives feedback on it; found per deployment through a partial index (most runs have none).
ALTER TABLE runs ADD COLUMN upstream_response_id TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_upstream_response ON runs (deployment_id, upstream_response_id) WHERE upstream_response_id <> '';
