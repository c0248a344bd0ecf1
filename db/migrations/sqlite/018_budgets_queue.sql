-- Token budgets of a deployment and of each key (docs/API.md, "Budgets"): at most budget_tokens prompt
-- plus completion tokens per UTC day or calendar month. Both NULL: no budget; both set otherwise.
ALTER TABLE deployments ADD COLUMN budget_tokens INTEGER CHECK (budget_tokens >= 1);
ALTER TABLE deployments ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
ALTER TABLE api_keys ADD COLUMN budget_tokens INTEGER CHECK (budget_tokens >= 1);
ALTER TABLE api_keys ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));

-- A run's wait for its model's turn in admission (docs/OPERATIONS.md, "Admission"), 0 when it did not
-- wait or was recorded before svc kept it.
ALTER TABLE runs ADD COLUMN queue_ms INTEGER NOT NULL DEFAULT 0;

-- A deployment's own bound on a call's wait for its model's turn (NULL: the model's queueTimeoutMs),
-- and each key's weight in its lane's deficit round robin (docs/OPERATIONS.md, "Admission").
ALTER TABLE deployments ADD COLUMN queue_timeout_ms INTEGER CHECK (queue_timeout_ms BETWEEN 1 AND 600000);
ALTER TABLE api_keys ADD COLUMN weight INTEGER NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 100);
