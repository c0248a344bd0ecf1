-- The prompt tokens an upstream read from its prefix cache (prompt_tokens_details.cached_tokens; a
-- fleet's affinity is what raises them), kept with each run and summed in the hourly usage, so that the
-- studio shows an endpoint's cache hit rate (docs/API.md, "Usage").
ALTER TABLE runs ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
