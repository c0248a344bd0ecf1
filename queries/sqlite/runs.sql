-- name: RunCreate :exec
INSERT INTO runs (
    id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
    created_at, expires_at, request, response, request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens, retried_from,
    arm, arm_target, shadow_of, ttft_ms
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: RunGet :one
SELECT * FROM runs WHERE id = ? AND deployment_id = ?;

-- name: RunListByDeployment :many
-- Newest first; the cursor is the (created_at, id) of the last run of the previous page.
SELECT id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens, created_at, expires_at,
       request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens, retried_from,
       arm, arm_target, shadow_of, ttft_ms
FROM runs
WHERE deployment_id = sqlc.arg(deployment_id)
  AND (CAST(sqlc.arg(cursor_at) AS INTEGER) = 0 OR created_at < CAST(sqlc.arg(cursor_at) AS INTEGER)
       OR (created_at = CAST(sqlc.arg(cursor_at) AS INTEGER) AND id < sqlc.arg(cursor_id)))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(lim);

-- name: RunCountByDeployment :one
SELECT count(*) FROM runs WHERE deployment_id = ?;

-- name: RunDeleteBatchByDeployment :execrows
DELETE FROM runs WHERE id IN (SELECT r.id FROM runs AS r WHERE r.deployment_id = ? LIMIT ?);

-- name: RunDeleteExpired :execrows
DELETE FROM runs WHERE id IN (SELECT r.id FROM runs AS r WHERE r.expires_at IS NOT NULL AND r.expires_at <= ? LIMIT ?);

-- name: RunCreateIfAbsent :execrows
-- Runs shipped by edge processes carry the id the edge gave them: a retried batch inserts nothing twice.
INSERT OR IGNORE INTO runs (
    id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
    created_at, expires_at, request, response, request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens, retried_from,
    arm, arm_target, shadow_of, ttft_ms
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);
