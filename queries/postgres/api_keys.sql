-- name: KeyCreate :exec
INSERT INTO api_keys (id, deployment_id, label, prefix, hash, enabled, created_at) VALUES ($1, $2, $3, $4, $5, TRUE, $6);

-- name: KeyGet :one
SELECT * FROM api_keys WHERE id = $1 AND deployment_id = $2;

-- name: KeyGetByHash :one
SELECT * FROM api_keys WHERE hash = $1;

-- name: KeyListByDeployment :many
SELECT * FROM api_keys WHERE deployment_id = $1 ORDER BY created_at, id;

-- name: KeyCountEnabled :one
SELECT count(*) FROM api_keys WHERE deployment_id = $1 AND enabled;

-- name: KeyRevoke :exec
UPDATE api_keys SET enabled = FALSE, revoked_at = $1 WHERE id = $2 AND enabled;

-- name: KeyTouch :exec
-- lastUsedAt only moves forward, so batches flushed out of order cannot rewind it.
UPDATE api_keys SET last_used_at = sqlc.arg(used_at)
WHERE id = sqlc.arg(id) AND (last_used_at IS NULL OR last_used_at < sqlc.arg(used_at));

-- name: KeyDeleteByDeployment :exec
DELETE FROM api_keys WHERE deployment_id = $1;

-- name: KeyLimitsSet :exec
UPDATE api_keys SET limit_requests_per_minute = $1, limit_tokens_per_minute = $2 WHERE id = $3;

-- name: KeyBudgetSet :exec
UPDATE api_keys SET budget_tokens = $1, budget_period = $2 WHERE id = $3;

-- name: KeyWeightSet :exec
UPDATE api_keys SET weight = $1 WHERE id = $2;

-- name: KeyListEnabledHashes :many
-- What an edge process needs to check keys without the database: ids, hashes, limits, budgets and weights, never more.
SELECT id, hash, limit_requests_per_minute, limit_tokens_per_minute, budget_tokens, budget_period, weight FROM api_keys WHERE deployment_id = $1 AND enabled ORDER BY id;
