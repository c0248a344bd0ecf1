-- name: EdgeChangeAdd :exec
-- Every query that adds changes runs in a transaction of db.Tx, which took the store's write lock
-- before this statement: each new id is the newest plus one (db/migrations/postgres/005_edges.sql).
INSERT INTO edge_changes (id, slug, created_at)
SELECT coalesce(max(id), 0) + 1, CAST(sqlc.arg(slug) AS TEXT), CAST(sqlc.arg(created_at) AS BIGINT) FROM edge_changes;

-- name: EdgeChangeAddForDeployment :exec
INSERT INTO edge_changes (id, slug, created_at)
SELECT (SELECT coalesce(max(id), 0) FROM edge_changes) + row_number() OVER (ORDER BY d.slug), d.slug, CAST(sqlc.arg(now) AS BIGINT)
FROM deployments AS d WHERE d.id = sqlc.arg(deployment_id);

-- name: EdgeChangeAddForJob :exec
-- A job's artifacts feed the snapshots of the deployments that target it.
INSERT INTO edge_changes (id, slug, created_at)
SELECT (SELECT coalesce(max(id), 0) FROM edge_changes) + row_number() OVER (ORDER BY d.slug), d.slug, CAST(sqlc.arg(now) AS BIGINT)
FROM deployments AS d
WHERE d.target_job_id = sqlc.arg(job_id) AND d.deleted_at IS NULL;

-- name: EdgeChangeAddForOrg :exec
INSERT INTO edge_changes (id, slug, created_at)
SELECT (SELECT coalesce(max(id), 0) FROM edge_changes) + row_number() OVER (ORDER BY d.slug), d.slug, CAST(sqlc.arg(now) AS BIGINT)
FROM deployments AS d JOIN projects AS p ON p.id = d.project_id
WHERE p.org_id = sqlc.arg(org_id) AND d.deleted_at IS NULL;

-- name: EdgeChangeListAfter :many
SELECT id, slug FROM edge_changes WHERE id > sqlc.arg(after) ORDER BY id LIMIT sqlc.arg(lim);

-- name: EdgeChangeBounds :one
-- The oldest and newest ids still kept (0, 0 when none ever was).
SELECT CAST(coalesce(min(id), 0) AS BIGINT) AS oldest, CAST(coalesce(max(id), 0) AS BIGINT) AS newest FROM edge_changes;

-- name: EdgeChangePrune :execrows
-- The caller passes the newest id, which is always kept: it tells a reconnecting edge where the feed
-- stands.
DELETE FROM edge_changes WHERE created_at < sqlc.arg(before) AND id < sqlc.arg(newest);
