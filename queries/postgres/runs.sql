-- name: RunCreate :exec
INSERT INTO runs (
    id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
    created_at, expires_at, request, response, request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens, retried_from,
    arm, arm_target, shadow_of, ttft_ms
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24);

-- name: RunGet :one
SELECT * FROM runs WHERE id = $1 AND deployment_id = $2;

-- name: RunListByDeployment :many
-- Newest first; the cursor is the (created_at, id) of the last run of the previous page.
SELECT id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens, created_at, expires_at,
       request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens, retried_from,
       arm, arm_target, shadow_of, ttft_ms
FROM runs
WHERE deployment_id = sqlc.arg(deployment_id)
  AND (CAST(sqlc.arg(cursor_at) AS BIGINT) = 0 OR created_at < CAST(sqlc.arg(cursor_at) AS BIGINT)
       OR (created_at = CAST(sqlc.arg(cursor_at) AS BIGINT) AND id < sqlc.arg(cursor_id)))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(lim);

-- name: RunCountByDeployment :one
SELECT count(*) FROM runs WHERE deployment_id = $1;

-- name: RunDeleteBatchByDeployment :execrows
DELETE FROM runs WHERE id IN (SELECT r.id FROM runs AS r WHERE r.deployment_id = $1 LIMIT $2);

-- name: RunDeleteExpired :execrows
DELETE FROM runs WHERE id IN (SELECT r.id FROM runs AS r WHERE r.expires_at IS NOT NULL AND r.expires_at <= $1 LIMIT $2);

-- name: RunCreateIfAbsent :execrows
-- Runs shipped by edge processes carry the id the edge gave them: a retried batch inserts nothing twice.
INSERT INTO runs (
    id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
    created_at, expires_at, request, response, request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens, retried_from,
    arm, arm_target, shadow_of, ttft_ms
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)
ON CONFLICT (id) DO NOTHING;
