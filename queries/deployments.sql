-- name: DeploymentCreate :exec
INSERT INTO deployments (
    id, slug, project_id, target_kind, target_job_id, target_step, target_model, auth_mode, enabled,
    run_retention_mode, run_retention_days, anonymous, expires_at, created_at, updated_at
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: DeploymentGet :one
SELECT * FROM deployments WHERE id = ? AND project_id = ? AND deleted_at IS NULL;

-- name: DeploymentGetBySlug :one
SELECT * FROM deployments WHERE slug = ? AND deleted_at IS NULL;

-- name: DeploymentListByProject :many
SELECT * FROM deployments WHERE project_id = ? AND deleted_at IS NULL ORDER BY created_at DESC, id DESC;

-- name: DeploymentUpdate :exec
UPDATE deployments SET
    target_kind = ?, target_job_id = ?, target_step = ?, target_model = ?, auth_mode = ?, enabled = ?,
    run_retention_mode = ?, run_retention_days = ?, updated_at = ?
WHERE id = ? AND deleted_at IS NULL;

-- name: DeploymentMarkDeleted :exec
UPDATE deployments SET deleted_at = ?, enabled = 0, updated_at = ? WHERE id = ?;

-- name: DeploymentDelete :exec
DELETE FROM deployments WHERE id = ?;

-- name: DeploymentListDeleted :many
SELECT id FROM deployments WHERE deleted_at IS NOT NULL ORDER BY deleted_at LIMIT ?;

-- name: DeploymentListExpired :many
SELECT id FROM deployments WHERE deleted_at IS NULL AND expires_at IS NOT NULL AND expires_at <= ? LIMIT ?;

-- name: DeploymentCountAnonymousLive :one
SELECT count(*) FROM deployments WHERE project_id = ? AND anonymous AND deleted_at IS NULL;

-- name: DeploymentLimitsSet :exec
UPDATE deployments SET limit_requests_per_minute = ?, limit_tokens_per_minute = ?, updated_at = ?
WHERE id = ? AND deleted_at IS NULL;
