-- PostgreSQL dialect of sqlite/018_budgets.sql.
ALTER TABLE deployments ADD COLUMN budget_tokens BIGINT CHECK (budget_tokens >= 1);
ALTER TABLE deployments ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
ALTER TABLE api_keys ADD COLUMN budget_tokens BIGINT CHECK (budget_tokens >= 1);
ALTER TABLE api_keys ADD COLUMN budget_period TEXT CHECK (budget_period IN ('day', 'month'));
