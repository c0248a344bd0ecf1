-- The replica (host:port) that answered a run, when its model has replicas (docs/API.md); "" for a
-- model with one upstream, and for a call no replica answered.
ALTER TABLE runs ADD COLUMN replica TEXT NOT NULL DEFAULT '';
