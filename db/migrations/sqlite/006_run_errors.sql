-- Why a run failed: the HTTP status it was answered with (200 for an answer, 429 for a refused one,
-- 499 when the client went away) and the error's code (rate_limit_exceeded, model_not_found, …;
-- empty for an answer). Runs recorded before this migration read 0 and ''.
ALTER TABLE runs ADD COLUMN status_code INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN error_code TEXT NOT NULL DEFAULT '';
