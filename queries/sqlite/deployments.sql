-- name: DeploymentCreate :exec
INSERT INTO deployments (
    id, slug, project_id, target_kind, target_job_id, target_step, target_model, auth_mode, enabled,
    run_retention_mode, run_retention_days, anonymous, expires_at, created_at, updated_at
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: DeploymentGet :one
SELECT * FROM deployments WHERE id = ? AND project_id = ? AND deleted_at IS NULL;

-- name: DeploymentGetBySlug :one
SELECT * FROM deployments WHERE slug = ? AND deleted_at IS NULL;

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

-- name: DeploymentCountLiveForIdentity :one
-- Live (not deleted, not expired) deployments in every project of the identity's orgs.
SELECT count(*) FROM deployments AS d
JOIN projects AS p ON p.id = d.project_id
JOIN memberships AS m ON m.org_id = p.org_id
WHERE m.identity_id = sqlc.arg(identity_id) AND d.deleted_at IS NULL
  AND (d.expires_at IS NULL OR d.expires_at > sqlc.arg(now));

-- name: DeploymentKeepForOrg :execrows
-- Claimed on sign-in: the org's live deployments stop expiring and no longer count as anonymous.
UPDATE deployments SET expires_at = NULL, anonymous = 0, updated_at = sqlc.arg(now)
WHERE project_id IN (SELECT id FROM projects WHERE org_id = sqlc.arg(org_id))
  AND deleted_at IS NULL AND (expires_at IS NULL OR expires_at > sqlc.arg(now));

-- name: DeploymentPageByProject :many
-- Newest first; the cursor is the (created_at, id) of the last deployment of the previous page.
SELECT * FROM deployments
WHERE project_id = sqlc.arg(project_id) AND deleted_at IS NULL
  AND (CAST(sqlc.arg(cursor_at) AS INTEGER) = 0 OR created_at < CAST(sqlc.arg(cursor_at) AS INTEGER)
       OR (created_at = CAST(sqlc.arg(cursor_at) AS INTEGER) AND id < sqlc.arg(cursor_id)))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(lim);

-- name: DeploymentLimitsSet :exec
UPDATE deployments SET limit_requests_per_minute = ?, limit_tokens_per_minute = ?, updated_at = ?
WHERE id = ? AND deleted_at IS NULL;

-- name: DeploymentBudgetSet :exec
UPDATE deployments SET budget_tokens = ?, budget_period = ?, updated_at = ?
WHERE id = ? AND deleted_at IS NULL;

-- name: DeploymentQueueTimeoutSet :exec
UPDATE deployments SET queue_timeout_ms = ?, updated_at = ?
WHERE id = ? AND deleted_at IS NULL;

-- name: DeploymentLive :one
-- Whether runs may still be written for the deployment (it exists and is not being drained).
SELECT count(*) FROM deployments WHERE id = ? AND deleted_at IS NULL;

-- name: DeploymentCanarySet :exec
-- Sets the canary (its id, target, percent and mode), or clears it with every column NULL.
UPDATE deployments SET canary_kind = sqlc.narg(canary_kind), canary_job_id = sqlc.narg(canary_job_id),
    canary_step = sqlc.narg(canary_step), canary_model = sqlc.narg(canary_model),
    canary_percent = sqlc.narg(canary_percent), canary_mode = sqlc.narg(canary_mode), canary_id = sqlc.narg(canary_id),
    canary_started_at = sqlc.narg(canary_started_at),
    updated_at = sqlc.arg(updated_at)
WHERE id = sqlc.arg(id) AND deleted_at IS NULL;
