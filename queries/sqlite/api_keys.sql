-- name: KeyCreate :exec
INSERT INTO api_keys (id, deployment_id, label, prefix, hash, enabled, created_at) VALUES (?, ?, ?, ?, ?, 1, ?);

-- name: KeyGet :one
SELECT * FROM api_keys WHERE id = ? AND deployment_id = ?;

-- name: KeyGetByHash :one
SELECT * FROM api_keys WHERE hash = ?;

-- name: KeyListByDeployment :many
SELECT * FROM api_keys WHERE deployment_id = ? ORDER BY created_at, id;

-- name: KeyCountEnabled :one
SELECT count(*) FROM api_keys WHERE deployment_id = ? AND enabled;

-- name: KeyRevoke :exec
UPDATE api_keys SET enabled = 0, revoked_at = ? WHERE id = ? AND enabled;

-- name: KeyTouch :exec
-- lastUsedAt only moves forward, so batches flushed out of order cannot rewind it.
UPDATE api_keys SET last_used_at = sqlc.arg(used_at)
WHERE id = sqlc.arg(id) AND (last_used_at IS NULL OR last_used_at < sqlc.arg(used_at));

-- name: KeyDeleteByDeployment :exec
DELETE FROM api_keys WHERE deployment_id = ?;

-- name: KeyLimitsSet :exec
UPDATE api_keys SET limit_requests_per_minute = ?, limit_tokens_per_minute = ? WHERE id = ?;

-- name: KeyBudgetSet :exec
UPDATE api_keys SET budget_tokens = ?, budget_period = ? WHERE id = ?;

-- name: KeyWeightSet :exec
UPDATE api_keys SET weight = ? WHERE id = ?;

-- name: KeyListEnabledHashes :many
-- What an edge process needs to check keys without the database: ids, hashes, limits, budgets and weights, never more.
SELECT id, hash, limit_requests_per_minute, limit_tokens_per_minute, budget_tokens, budget_period, weight FROM api_keys WHERE deployment_id = ? AND enabled ORDER BY id;
