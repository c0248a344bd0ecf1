-- Request ids on runs: svc's own (the X-Request-Id answered to the caller) and the upstream's, so that
-- one call can be followed through svc's logs, its run and the inference server's logs.
ALTER TABLE runs ADD COLUMN request_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN upstream_request_id TEXT NOT NULL DEFAULT '';
