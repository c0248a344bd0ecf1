-- Refused calls by status (docs/API.md, "Usage"): of a row's errors, how many were refused by the edge
-- before any answer was computed, with 401 (wrong or missing key), 404 (endpoint disabled) or 429
-- (rate limit). Rows written before this migration count none.
ALTER TABLE usage_hourly ADD COLUMN refused_401 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN refused_404 INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN refused_429 INTEGER NOT NULL DEFAULT 0;
