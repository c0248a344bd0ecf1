-- Admission in usage (docs/API.md, "Usage"): of a row's refused_429, the calls refused because their
-- model stayed busy (model_busy) and because a budget was spent (budget_exhausted); and the calls that
-- waited for their model's turn, with the milliseconds they waited in all. Rows written before this
-- migration count none.
ALTER TABLE usage_hourly ADD COLUMN refused_busy INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN refused_budget INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN queue_ms_sum INTEGER NOT NULL DEFAULT 0;
