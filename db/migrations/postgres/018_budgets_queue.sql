-- PostgreSQL dialect of sqlite/018_budgets_queue.sql.
ALTER TABLE deployments ADD COLUMN budget_tokens BIGINT CHECK (budget_tokens >= 1);
ALTER TABLE deployments ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
ALTER TABLE api_keys ADD COLUMN budget_tokens BIGINT CHECK (budget_tokens >= 1);
ALTER TABLE api_keys ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
ALTER TABLE runs ADD COLUMN queue_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE deployments ADD COLUMN queue_timeout_ms BIGINT CHECK (queue_timeout_ms BETWEEN 1 AND 600000);
ALTER TABLE api_keys ADD COLUMN weight BIGINT NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 100);
