-- Canaries and their history (docs/API.md, "Canary").

-- name: CanaryCreate :exec
INSERT INTO canaries (id, deployment_id, kind, job_id, step, model, percent, mode, started_at, started_by)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10);

-- name: CanaryPercentSet :exec
-- A running canary's new percent (its target and mode unchanged: the same canary).
UPDATE canaries SET percent = sqlc.arg(percent) WHERE id = sqlc.arg(id);

-- name: CanaryEnd :exec
-- Ends a running canary with its outcome; one that ended already keeps its first ending.
UPDATE canaries SET ended_at = sqlc.arg(ended_at), ended_by = sqlc.arg(ended_by), outcome = sqlc.arg(outcome)
WHERE id = sqlc.arg(id) AND outcome = '';

-- name: CanaryGet :one
SELECT id, deployment_id, kind, job_id, step, model, percent, mode, started_at, started_by, ended_at, ended_by, outcome, override_reason FROM canaries WHERE id = sqlc.arg(id) AND deployment_id = sqlc.arg(deployment_id);

-- name: CanaryList :many
-- A deployment's canaries, the newest first.
SELECT id, deployment_id, kind, job_id, step, model, percent, mode, started_at, started_by, ended_at, ended_by, outcome, override_reason FROM canaries WHERE deployment_id = sqlc.arg(deployment_id)
ORDER BY started_at DESC, id DESC;
