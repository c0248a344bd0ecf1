-- The replica (host:port) that failed before any byte of its answer when a fleet's call was retried on
-- another (docs/API.md); "" for a call that was not retried, and for a model with one upstream.
ALTER TABLE runs ADD COLUMN retried_from TEXT NOT NULL DEFAULT '';
