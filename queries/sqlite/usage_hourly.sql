-- name: UsageAdd :exec
-- Adds one batch's counts to an hour's row, creating it on first use.
INSERT INTO usage_hourly (
    deployment_id, key_id, hour, requests, errors, prompt_tokens, completion_tokens, latency_sum_ms,
    lat_25, lat_50, lat_100, lat_250, lat_500, lat_1000, lat_2500, lat_5000, lat_10000, lat_30000, lat_60000, lat_inf,
    refused_401, refused_404, refused_429, cached_tokens, refused_busy, refused_budget, queued, queue_ms_sum
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (deployment_id, key_id, hour) DO UPDATE SET
    requests = requests + excluded.requests,
    errors = errors + excluded.errors,
    prompt_tokens = prompt_tokens + excluded.prompt_tokens,
    completion_tokens = completion_tokens + excluded.completion_tokens,
    latency_sum_ms = latency_sum_ms + excluded.latency_sum_ms,
    lat_25 = lat_25 + excluded.lat_25,
    lat_50 = lat_50 + excluded.lat_50,
    lat_100 = lat_100 + excluded.lat_100,
    lat_250 = lat_250 + excluded.lat_250,
    lat_500 = lat_500 + excluded.lat_500,
    lat_1000 = lat_1000 + excluded.lat_1000,
    lat_2500 = lat_2500 + excluded.lat_2500,
    lat_5000 = lat_5000 + excluded.lat_5000,
    lat_10000 = lat_10000 + excluded.lat_10000,
    lat_30000 = lat_30000 + excluded.lat_30000,
    lat_60000 = lat_60000 + excluded.lat_60000,
    lat_inf = lat_inf + excluded.lat_inf,
    refused_401 = refused_401 + excluded.refused_401,
    refused_404 = refused_404 + excluded.refused_404,
    refused_429 = refused_429 + excluded.refused_429,
    cached_tokens = cached_tokens + excluded.cached_tokens,
    refused_busy = refused_busy + excluded.refused_busy,
    refused_budget = refused_budget + excluded.refused_budget,
    queued = queued + excluded.queued,
    queue_ms_sum = queue_ms_sum + excluded.queue_ms_sum;

-- name: UsageListByDeployment :many
-- A deployment's hours in [from, to), every key's counts summed (the calls clients made: the copies svc
-- made, key '~copies' (runs.CopiesKey), are left out); hours without calls have no row.
SELECT hour,
    CAST(sum(requests) AS INTEGER) AS requests, CAST(sum(errors) AS INTEGER) AS errors,
    CAST(sum(prompt_tokens) AS INTEGER) AS prompt_tokens, CAST(sum(completion_tokens) AS INTEGER) AS completion_tokens,
    CAST(sum(latency_sum_ms) AS INTEGER) AS latency_sum_ms,
    CAST(sum(lat_25) AS INTEGER) AS lat_25, CAST(sum(lat_50) AS INTEGER) AS lat_50,
    CAST(sum(lat_100) AS INTEGER) AS lat_100, CAST(sum(lat_250) AS INTEGER) AS lat_250,
    CAST(sum(lat_500) AS INTEGER) AS lat_500, CAST(sum(lat_1000) AS INTEGER) AS lat_1000,
    CAST(sum(lat_2500) AS INTEGER) AS lat_2500, CAST(sum(lat_5000) AS INTEGER) AS lat_5000,
    CAST(sum(lat_10000) AS INTEGER) AS lat_10000, CAST(sum(lat_30000) AS INTEGER) AS lat_30000,
    CAST(sum(lat_60000) AS INTEGER) AS lat_60000, CAST(sum(lat_inf) AS INTEGER) AS lat_inf,
    CAST(sum(refused_401) AS INTEGER) AS refused_401, CAST(sum(refused_404) AS INTEGER) AS refused_404,
    CAST(sum(refused_429) AS INTEGER) AS refused_429, CAST(sum(cached_tokens) AS INTEGER) AS cached_tokens,
    CAST(sum(feedback_up) AS INTEGER) AS feedback_up, CAST(sum(feedback_down) AS INTEGER) AS feedback_down,
    CAST(sum(feedback_neutral) AS INTEGER) AS feedback_neutral,
    CAST(sum(refused_busy) AS INTEGER) AS refused_busy, CAST(sum(refused_budget) AS INTEGER) AS refused_budget,
    CAST(sum(queued) AS INTEGER) AS queued, CAST(sum(queue_ms_sum) AS INTEGER) AS queue_ms_sum
FROM usage_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND key_id != '~copies'
  AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour)
GROUP BY hour
ORDER BY hour;

-- name: UsageCopiesByDeployment :many
-- The calls svc made itself from a deployment's calls (shadow copies: key '~copies', runs.CopiesKey) in
-- its hours in [from, to), shown apart from the callers'; hours without copies have no row.
SELECT hour, requests, errors, prompt_tokens, completion_tokens
FROM usage_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND key_id = '~copies'
  AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour)
ORDER BY hour;

-- name: UsageListByKey :many
-- One key's hours in [from, to).
SELECT hour, requests, errors, prompt_tokens, completion_tokens, latency_sum_ms,
    lat_25, lat_50, lat_100, lat_250, lat_500, lat_1000, lat_2500, lat_5000, lat_10000, lat_30000, lat_60000, lat_inf,
    refused_401, refused_404, refused_429, cached_tokens, feedback_up, feedback_down, feedback_neutral,
    refused_busy, refused_budget, queued, queue_ms_sum
FROM usage_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND key_id = sqlc.arg(key_id)
  AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour)
ORDER BY hour;

-- name: UsageTotalsByKey :many
-- Each key's totals over [from, to); calls without a key and the copies svc made are left out.
SELECT key_id,
    CAST(sum(requests) AS INTEGER) AS requests, CAST(sum(errors) AS INTEGER) AS errors,
    CAST(sum(prompt_tokens) AS INTEGER) AS prompt_tokens, CAST(sum(completion_tokens) AS INTEGER) AS completion_tokens
FROM usage_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND key_id != '' AND key_id != '~copies'
  AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour)
GROUP BY key_id
ORDER BY key_id;

-- name: UsageTotalsByDeployment :many
-- Each of the deployments' totals over [from, to), counted as UsageListByDeployment counts them (the
-- callers' calls, the copies svc made left out): a page of deployments' budgets in one read. ids is
-- a JSON array of the deployments' ids, one text parameter on both engines.
SELECT deployment_id,
    CAST(sum(prompt_tokens) AS INTEGER) AS prompt_tokens, CAST(sum(completion_tokens) AS INTEGER) AS completion_tokens
FROM usage_hourly
WHERE deployment_id IN (SELECT value FROM json_each(CAST(sqlc.arg(ids) AS TEXT))) AND key_id != '~copies'
  AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour)
GROUP BY deployment_id
ORDER BY deployment_id;

-- name: UsageDeleteBefore :execrows
DELETE FROM usage_hourly WHERE hour < ?;

-- name: UsageFeedbackAdd :exec
-- Moves feedback counts of the hour's row of a run (each -1, 0 or 1), when a score is given or changed.
UPDATE usage_hourly SET feedback_up = feedback_up + sqlc.arg(up), feedback_down = feedback_down + sqlc.arg(down),
    feedback_neutral = feedback_neutral + sqlc.arg(neutral)
WHERE deployment_id = sqlc.arg(deployment_id) AND key_id = sqlc.arg(key_id) AND hour = sqlc.arg(hour);

-- name: UsageAnsweredInHours :one
-- The calls a deployment answered (requests less errors) in its hours in [from, to), every key's: what
-- an export compares with the runs it stores to count those it kept no transcript of.
SELECT CAST(COALESCE(sum(requests - errors), 0) AS INTEGER) AS answered
FROM usage_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour);

-- name: UsageSketch :one
-- The latency sketch of a row and its requests, within the transaction that just added to it (UsageAdd
-- holds the row's lock on PostgreSQL): the recorder merges a batch's sketch into it.
SELECT requests, latency_sketch FROM usage_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND key_id = sqlc.arg(key_id) AND hour = sqlc.arg(hour);

-- name: UsageSketchSet :exec
UPDATE usage_hourly SET latency_sketch = sqlc.arg(latency_sketch)
WHERE deployment_id = sqlc.arg(deployment_id) AND key_id = sqlc.arg(key_id) AND hour = sqlc.arg(hour);

-- name: UsageSketchList :many
-- The latency sketches of a deployment's rows in hours [from, to), of one key when key_id is not empty:
-- the usage route merges them per bucket. A row written before the sketches has none.
SELECT hour, requests, latency_sketch FROM usage_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour)
  AND (CAST(sqlc.arg(key_id) AS TEXT) = '' OR key_id = sqlc.arg(key_id))
ORDER BY hour;
