-- name: RunCreate :exec
INSERT INTO runs (
    id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens,
    created_at, expires_at, request, response, request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens, retried_from,
    arm, arm_target, shadow_of, ttft_ms, upstream_response_id, canary_id, eval_id, eval_of, surface, queue_ms
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: RunGet :one
SELECT * FROM runs WHERE id = ? AND deployment_id = ?;

-- name: RunListByDeployment :many
-- Newest first; the cursor is the (created_at, id) of the last run of the previous page. The filters
-- (core.RunFilter), each off when empty or 0: status ("ok", "error", or "refused": the calls svc itself answered 429), key_id, arm ("primary": the calls
-- clients made that the primary answered, with the runs of no canary; "canary": the canary's, its shadow
-- copies included; "shadow": the shadow copies), surface (the route the call came in by), created in
-- [since, until).
SELECT id, deployment_id, key_id, model, status, latency_ms, prompt_tokens, completion_tokens, created_at, expires_at,
       request_id, upstream_request_id, status_code, error_code, trace_id, replica, cached_tokens, retried_from,
       arm, arm_target, shadow_of, ttft_ms, upstream_response_id, canary_id, eval_id, eval_of, surface, queue_ms,
       feedback_score, feedback_comment, feedback_at
FROM runs
WHERE deployment_id = sqlc.arg(deployment_id)
  AND (CAST(sqlc.arg(cursor_at) AS INTEGER) = 0 OR created_at < CAST(sqlc.arg(cursor_at) AS INTEGER)
       OR (created_at = CAST(sqlc.arg(cursor_at) AS INTEGER) AND id < sqlc.arg(cursor_id)))
  AND (CAST(sqlc.arg(status_is) AS TEXT) = '' OR status = CAST(sqlc.arg(status_is) AS TEXT)
       OR (CAST(sqlc.arg(status_is) AS TEXT) = 'refused' AND status_code = 429))
  AND (CAST(sqlc.arg(key_is) AS TEXT) = '' OR key_id = CAST(sqlc.arg(key_is) AS TEXT))
  AND CASE CAST(sqlc.arg(arm_is) AS TEXT) WHEN 'primary' THEN arm NOT IN ('canary', 'eval') AND shadow_of = ''
      WHEN 'canary' THEN arm = 'canary' WHEN 'shadow' THEN shadow_of <> '' WHEN 'eval' THEN arm = 'eval' ELSE 1 END
  AND (CAST(sqlc.arg(surface_is) AS TEXT) = '' OR surface = CAST(sqlc.arg(surface_is) AS TEXT))
  AND created_at >= CAST(sqlc.arg(since) AS INTEGER)
  AND (CAST(sqlc.arg(until) AS INTEGER) = 0 OR created_at < CAST(sqlc.arg(until) AS INTEGER))
ORDER BY created_at DESC, id DESC
LIMIT sqlc.arg(lim);

-- name: RunRequest :one
-- A run's recorded request alone: what a listing's prompt preview is read from.
SELECT request FROM runs WHERE id = ? AND deployment_id = ?;

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
    arm, arm_target, shadow_of, ttft_ms, upstream_response_id, canary_id, eval_id, eval_of, surface, queue_ms
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?);

-- name: RunFeedbackTarget :one
-- The run feedback is given on, within its transaction: its key and hour (the usage row to adjust) and
-- the score it holds, its arm, the arm's target and its canary (the per-arm usage row) when a canary answered, and
-- the primary run a shadow copy was made of and the run an eval replayed (a copy's usage row is the deployment's, runs.CopiesKey).
SELECT key_id, created_at, expires_at, feedback_score, arm, arm_target, canary_id, shadow_of, eval_of FROM runs
WHERE id = sqlc.arg(id) AND deployment_id = sqlc.arg(deployment_id);

-- name: RunFeedbackSet :exec
UPDATE runs SET feedback_score = sqlc.arg(score), feedback_comment = sqlc.arg(comment), feedback_at = sqlc.arg(at)
WHERE id = sqlc.arg(id) AND deployment_id = sqlc.arg(deployment_id);

-- name: RunExportPage :many
-- Oldest first from the cursor (the (created_at, id) of the last run of the previous page, created_at 0
-- for the first page), in [since, until), unexpired at now, scored min_score or more when has_min_score
-- (a run without feedback counts as neutral, 0: min_score 0 leaves out only the runs marked bad),
-- of the arm asked ("": the calls clients made, shadow copies left out; "primary": those the primary
-- answered, with the runs of no canary; "canary": the canary's, its shadow copies included).
SELECT id, status, created_at, request, response, feedback_score
FROM runs
WHERE deployment_id = sqlc.arg(deployment_id)
  AND created_at >= sqlc.arg(since) AND created_at < sqlc.arg(until)
  AND (expires_at IS NULL OR expires_at > sqlc.arg(now))
  AND (created_at > CAST(sqlc.arg(cursor_at) AS INTEGER)
       OR (created_at = CAST(sqlc.arg(cursor_at) AS INTEGER) AND id > sqlc.arg(cursor_id)))
  AND CASE CAST(sqlc.arg(arm) AS TEXT) WHEN 'primary' THEN arm NOT IN ('canary', 'eval') AND shadow_of = ''
      WHEN 'canary' THEN arm = 'canary' ELSE shadow_of = '' AND eval_id = '' END
  AND (CAST(sqlc.arg(has_min_score) AS INTEGER) = 0 OR COALESCE(feedback_score, 0) >= CAST(sqlc.arg(min_score) AS INTEGER))
ORDER BY created_at, id
LIMIT sqlc.arg(lim);

-- name: RunShadowPairPage :many
-- The shadow copies in [since, until), oldest first from the cursor as RunExportPage, each with the
-- primary run it copies (both unexpired at now): the pairs a preference export ranks by feedback.
SELECT s.id, s.created_at, s.status, s.request, s.response, s.feedback_score,
       p.id AS primary_id, p.status AS primary_status, p.request AS primary_request, p.response AS primary_response,
       p.feedback_score AS primary_score
FROM runs AS s JOIN runs AS p ON p.id = s.shadow_of AND p.deployment_id = s.deployment_id
WHERE s.deployment_id = sqlc.arg(deployment_id) AND s.shadow_of <> ''
  AND s.created_at >= sqlc.arg(since) AND s.created_at < sqlc.arg(until)
  AND (s.expires_at IS NULL OR s.expires_at > sqlc.arg(now)) AND (p.expires_at IS NULL OR p.expires_at > sqlc.arg(now))
  AND (s.created_at > CAST(sqlc.arg(cursor_at) AS INTEGER)
       OR (s.created_at = CAST(sqlc.arg(cursor_at) AS INTEGER) AND s.id > sqlc.arg(cursor_id)))
ORDER BY s.created_at, s.id
LIMIT sqlc.arg(lim);

-- name: RunIDByUpstreamResponse :one
-- The run of a passed-through Responses answer, by the upstream's response id its caller got.
SELECT id FROM runs WHERE deployment_id = ? AND upstream_response_id = ? AND upstream_response_id <> '' LIMIT 1;

-- name: RunCountAnswered :one
-- The answered runs (status ok) a deployment stores, unexpired at now, made in [from, to), of an arm
-- ("": every run, shadow copies included; "primary": those not the canary's; "canary": the canary's):
-- what the usage aggregates' answered calls of the same hours are compared with (UsageAnsweredInHours).
SELECT count(*) FROM runs
WHERE deployment_id = sqlc.arg(deployment_id) AND status = 'ok'
  AND created_at >= sqlc.arg(from_at) AND created_at < sqlc.arg(to_at)
  AND (expires_at IS NULL OR expires_at > sqlc.arg(now))
  AND CASE CAST(sqlc.arg(arm) AS TEXT) WHEN 'primary' THEN arm <> 'canary' WHEN 'canary' THEN arm = 'canary' ELSE TRUE END;
