-- Token budgets of a deployment and of each key (docs/API.md, "Budgets"): at most budget_tokens prompt
-- plus completion tokens per UTC day or calendar month. Both NULL: no budget; both set otherwise.
ALTER TABLE deployments ADD COLUMN budget_tokens INTEGER CHECK (budget_tokens >= 1);
ALTER TABLE deployments ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
ALTER TABLE api_keys ADD COLUMN budget_tokens INTEGER CHECK (budget_tokens >= 1);
ALTER TABLE api_keys ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));

-- A run's wait for its model's turn in admission (docs/OPERATIONS.md, "Admission"), 0 when it did not
-- wait or was recorded before svc kept it.
ALTER TABLE runs ADD COLUMN queue_ms INTEGER NOT NULL DEFAULT 0;
