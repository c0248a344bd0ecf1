-- Replay evals and their work items (docs/API.md, "Evals").

-- name: EvalCreate :exec
INSERT INTO evals (id, deployment_id, state, candidate, baseline, filter, judge_model, judge_rubric, concurrency, created_by, created_at)
VALUES (?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?);

-- name: EvalItemAdd :exec
-- A source run to replay; the same run twice in one eval is one item.
INSERT INTO eval_items (eval_id, source_run_id, seq) VALUES (?, ?, ?) ON CONFLICT DO NOTHING;

-- name: EvalSetTotal :exec
UPDATE evals SET total = sqlc.arg(total) WHERE id = sqlc.arg(id);

-- name: EvalGet :one
SELECT * FROM evals WHERE id = sqlc.arg(id) AND deployment_id = sqlc.arg(deployment_id);

-- name: EvalGetByID :one
SELECT * FROM evals WHERE id = ?;

-- name: EvalPage :many
-- A deployment's evals, newest first; the cursor is the (created_at, id) of the last of the previous page.
SELECT * FROM evals
WHERE deployment_id = sqlc.arg(deployment_id)
  AND (CAST(sqlc.arg(cursor_at) AS INTEGER) = 0 OR created_at < CAST(sqlc.arg(cursor_at) AS INTEGER)
       OR (created_at = CAST(sqlc.arg(cursor_at) AS INTEGER) AND id < sqlc.arg(cursor_id)))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(lim);

-- name: EvalDoneByDeployment :many
-- The deployment's done evals, the newest first: the gate looks for one of the candidate.
SELECT * FROM evals WHERE deployment_id = ? AND state = 'done' ORDER BY finished_at DESC LIMIT ?;

-- name: EvalOpenIDs :many
-- The evals with work left (queued or running), the oldest first: what a worker looks at.
SELECT id FROM evals WHERE state IN ('queued', 'running') ORDER BY created_at, id LIMIT ?;

-- name: EvalStart :exec
UPDATE evals SET state = 'running', started_at = sqlc.arg(now) WHERE id = sqlc.arg(id) AND state = 'queued';

-- name: EvalEnd :execrows
-- Ends an open eval (done, failed or canceled) once; an eval already ended keeps its end.
UPDATE evals SET state = sqlc.arg(state), summary = sqlc.narg(summary), error = sqlc.arg(error), finished_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND state IN ('queued', 'running');

-- name: EvalItemClaim :many
-- Takes up to lim items of an eval for a worker until lease_until: pending ones, and claimed ones whose
-- lease ended (a replica that died). The state is checked again on the row updated, so that two
-- workers never hold one item.
UPDATE eval_items SET state = 'claimed', claimed_by = sqlc.arg(worker), lease_until = sqlc.arg(lease_until), attempts = attempts + 1, eval_run_id = ''
WHERE eval_items.eval_id = sqlc.arg(eval_id)
  AND (eval_items.state = 'pending' OR (eval_items.state = 'claimed' AND eval_items.lease_until < sqlc.arg(now)))
  AND eval_items.source_run_id IN (
    SELECT i.source_run_id FROM eval_items AS i
    WHERE i.eval_id = sqlc.arg(eval_id) AND (i.state = 'pending' OR (i.state = 'claimed' AND i.lease_until < sqlc.arg(now)))
    ORDER BY i.seq LIMIT sqlc.arg(lim))
RETURNING source_run_id, attempts;

-- name: EvalLockForClaim :one
-- Reads an eval's concurrency in the transaction that claims its items (SQLite's is immediate: one
-- claimer at a time, so the count of its items under way is not read by two at once).
SELECT concurrency FROM evals WHERE id = sqlc.arg(id);

-- name: EvalItemsCalling :one
-- Counts an eval's items whose model calls are under way, on every replica: claimed with a live lease
-- and not yet answered (EvalItemAnswered). The eval's concurrency bounds it.
SELECT COUNT(*) FROM eval_items
WHERE eval_id = sqlc.arg(eval_id) AND state = 'claimed' AND lease_until >= sqlc.arg(now) AND eval_run_id = '';

-- name: EvalItemAnswered :exec
-- Marks a claimed item's model calls done (its eval run named), by the worker that holds it: it no longer
-- counts against the eval's concurrency while its run reaches the store.
UPDATE eval_items SET eval_run_id = sqlc.arg(eval_run_id)
WHERE eval_id = sqlc.arg(eval_id) AND source_run_id = sqlc.arg(source_run_id) AND state = 'claimed' AND claimed_by = sqlc.arg(worker);

-- name: EvalItemDone :execrows
-- Records an item's result, by the worker that holds it.
UPDATE eval_items SET state = sqlc.arg(state), eval_run_id = sqlc.arg(eval_run_id), result = sqlc.narg(result), error = sqlc.arg(error), lease_until = 0
WHERE eval_id = sqlc.arg(eval_id) AND source_run_id = sqlc.arg(source_run_id) AND state = 'claimed' AND claimed_by = sqlc.arg(worker);

-- name: EvalItemRelease :exec
-- Gives a worker's claimed items back (it stops: an eval canceled, a server shutting down).
UPDATE eval_items SET state = 'pending', claimed_by = '', lease_until = 0
WHERE eval_id = sqlc.arg(eval_id) AND source_run_id = sqlc.arg(source_run_id) AND state = 'claimed' AND claimed_by = sqlc.arg(worker);

-- name: EvalProgress :one
SELECT CAST(count(*) AS INTEGER) AS total,
       CAST(COALESCE(SUM(CASE WHEN state = 'done' THEN 1 ELSE 0 END), 0) AS INTEGER) AS done,
       CAST(COALESCE(SUM(CASE WHEN state = 'failed' THEN 1 ELSE 0 END), 0) AS INTEGER) AS failed
FROM eval_items WHERE eval_id = ?;

-- name: EvalItemPage :many
-- An eval's finished items in their order from the cursor (the seq of the last of the previous page).
SELECT source_run_id, seq, state, eval_run_id, result, error FROM eval_items
WHERE eval_id = sqlc.arg(eval_id) AND state IN ('done', 'failed') AND seq > sqlc.arg(after)
ORDER BY seq LIMIT sqlc.arg(lim);

-- name: RunResponse :one
-- A run's recorded request, answer and feedback: what an eval compares.
SELECT id, status, request, response, feedback_score FROM runs WHERE id = ? AND deployment_id = ?;

-- name: RunResponsesByIDs :many
-- The recorded request and answer of a deployment's runs among ids (a JSON array of run ids, one text
-- parameter on both engines): a page of an eval's pairs in one read. A run no longer stored has no row.
SELECT id, status, request, response FROM runs
WHERE deployment_id = sqlc.arg(deployment_id) AND id IN (SELECT value FROM json_each(CAST(sqlc.arg(ids) AS TEXT)));

-- name: DeploymentGateSet :exec
UPDATE deployments SET gate_min_win_rate = sqlc.narg(min_win_rate), gate_max_age_hours = sqlc.narg(max_age_hours), updated_at = sqlc.arg(now)
WHERE id = sqlc.arg(id) AND deleted_at IS NULL;

-- name: CanaryOverride :exec
-- A promotion past the gate: why, on the canary it promoted.
UPDATE canaries SET override_reason = sqlc.arg(reason) WHERE id = sqlc.arg(id);

-- name: EvalItemRenew :exec
-- Extends the lease of an item under way, by the worker that holds it.
UPDATE eval_items SET lease_until = sqlc.arg(lease_until)
WHERE eval_id = sqlc.arg(eval_id) AND source_run_id = sqlc.arg(source_run_id) AND state = 'claimed' AND claimed_by = sqlc.arg(worker);

-- name: EvalDeployment :one
-- The slug and project of an eval's deployment, while it is not deleted.
SELECT slug, project_id FROM deployments WHERE id = ? AND deleted_at IS NULL;

-- name: DeploymentGate :one
SELECT gate_min_win_rate, gate_max_age_hours FROM deployments WHERE id = ?;
