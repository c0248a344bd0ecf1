-- name: JobCreate :exec
INSERT INTO jobs (id, project_id, base_model, status, final_adapter, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: JobGet :one
SELECT * FROM jobs WHERE id = ? AND project_id = ?;

-- name: JobGetAnyProject :one
-- Used by target validation, which must tell "job of another project" from "no such job".
SELECT * FROM jobs WHERE id = ?;

-- name: JobUpdate :exec
UPDATE jobs SET status = ?, final_adapter = ?, updated_at = ? WHERE id = ?;

-- name: JobCheckpointUpsert :exec
INSERT INTO job_checkpoints (job_id, step, artifact, created_at) VALUES (?, ?, ?, ?)
ON CONFLICT (job_id, step) DO UPDATE SET artifact = excluded.artifact;

-- name: JobCheckpointList :many
SELECT * FROM job_checkpoints WHERE job_id = ? ORDER BY step;

-- name: JobCheckpointGet :one
SELECT * FROM job_checkpoints WHERE job_id = ? AND step = ?;

-- name: JobPageByProject :many
-- Newest first; the cursor is the (created_at, id) of the last job of the previous page.
SELECT * FROM jobs
WHERE project_id = sqlc.arg(project_id)
  AND (CAST(sqlc.arg(cursor_at) AS INTEGER) = 0 OR created_at < CAST(sqlc.arg(cursor_at) AS INTEGER)
       OR (created_at = CAST(sqlc.arg(cursor_at) AS INTEGER) AND id < sqlc.arg(cursor_id)))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(lim);
