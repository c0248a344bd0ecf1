-- name: JobCreate :exec
INSERT INTO jobs (id, project_id, base_model, status, final_adapter, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7);

-- name: JobGet :one
SELECT * FROM jobs WHERE id = $1 AND project_id = $2;

-- name: JobGetAnyProject :one
-- Used by target validation, which must tell "job of another project" from "no such job".
SELECT * FROM jobs WHERE id = $1;

-- name: JobUpdate :exec
UPDATE jobs SET status = $1, final_adapter = $2, updated_at = $3 WHERE id = $4;

-- name: JobCheckpointUpsert :exec
INSERT INTO job_checkpoints (job_id, step, artifact, created_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (job_id, step) DO UPDATE SET artifact = excluded.artifact;

-- name: JobCheckpointList :many
SELECT * FROM job_checkpoints WHERE job_id = $1 ORDER BY step;

-- name: JobCheckpointGet :one
SELECT * FROM job_checkpoints WHERE job_id = $1 AND step = $2;

-- name: JobPageByProject :many
-- Newest first; the cursor is the (created_at, id) of the last job of the previous page.
SELECT * FROM jobs
WHERE project_id = sqlc.arg(project_id)
  AND (CAST(sqlc.arg(cursor_at) AS BIGINT) = 0 OR created_at < CAST(sqlc.arg(cursor_at) AS BIGINT)
       OR (created_at = CAST(sqlc.arg(cursor_at) AS BIGINT) AND id < sqlc.arg(cursor_id)))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(lim);
