-- name: EdgeChangeAdd :exec
INSERT INTO edge_changes (slug, created_at) VALUES (?, ?);

-- name: EdgeChangeAddForDeployment :exec
INSERT INTO edge_changes (slug, created_at)
SELECT d.slug, CAST(sqlc.arg(now) AS INTEGER) FROM deployments AS d WHERE d.id = sqlc.arg(deployment_id);

-- name: EdgeChangeAddForJob :exec
-- A job's artifacts feed the snapshots of the deployments that target it.
INSERT INTO edge_changes (slug, created_at)
SELECT d.slug, CAST(sqlc.arg(now) AS INTEGER) FROM deployments AS d
WHERE d.target_job_id = sqlc.arg(job_id) AND d.deleted_at IS NULL;

-- name: EdgeChangeAddForOrg :exec
INSERT INTO edge_changes (slug, created_at)
SELECT d.slug, CAST(sqlc.arg(now) AS INTEGER) FROM deployments AS d JOIN projects AS p ON p.id = d.project_id
WHERE p.org_id = sqlc.arg(org_id) AND d.deleted_at IS NULL;

-- name: EdgeChangeListAfter :many
SELECT id, slug FROM edge_changes WHERE id > sqlc.arg(after) ORDER BY id LIMIT sqlc.arg(lim);

-- name: EdgeChangeBounds :one
-- The oldest and newest ids still kept (0, 0 when none ever was).
SELECT CAST(coalesce(min(id), 0) AS INTEGER) AS oldest, CAST(coalesce(max(id), 0) AS INTEGER) AS newest FROM edge_changes;

-- name: EdgeChangePrune :execrows
-- The caller passes the newest id, which is always kept: it tells a reconnecting edge where the feed
-- stands.
DELETE FROM edge_changes WHERE created_at < sqlc.arg(before) AND id < sqlc.arg(newest);
