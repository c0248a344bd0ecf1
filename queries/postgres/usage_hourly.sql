-- name: UsageAdd :exec
-- Adds one batch's counts to an hour's row, creating it on first use.
INSERT INTO usage_hourly (
    deployment_id, key_id, hour, requests, errors, prompt_tokens, completion_tokens, latency_sum_ms,
    lat_25, lat_50, lat_100, lat_250, lat_500, lat_1000, lat_2500, lat_5000, lat_10000, lat_30000, lat_60000, lat_inf,
    refused_401, refused_404, refused_429, cached_tokens, refused_busy, refused_budget, queued, queue_ms_sum
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)
ON CONFLICT (deployment_id, key_id, hour) DO UPDATE SET
    requests = usage_hourly.requests + excluded.requests,
    errors = usage_hourly.errors + excluded.errors,
    prompt_tokens = usage_hourly.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = usage_hourly.completion_tokens + excluded.completion_tokens,
    latency_sum_ms = usage_hourly.latency_sum_ms + excluded.latency_sum_ms,
    lat_25 = usage_hourly.lat_25 + excluded.lat_25,
    lat_50 = usage_hourly.lat_50 + excluded.lat_50,
    lat_100 = usage_hourly.lat_100 + excluded.lat_100,
    lat_250 = usage_hourly.lat_250 + excluded.lat_250,
    lat_500 = usage_hourly.lat_500 + excluded.lat_500,
    lat_1000 = usage_hourly.lat_1000 + excluded.lat_1000,
    lat_2500 = usage_hourly.lat_2500 + excluded.lat_2500,
    lat_5000 = usage_hourly.lat_5000 + excluded.lat_5000,
    lat_10000 = usage_hourly.lat_10000 + excluded.lat_10000,
    lat_30000 = usage_hourly.lat_30000 + excluded.lat_30000,
    lat_60000 = usage_hourly.lat_60000 + excluded.lat_60000,
    lat_inf = usage_hourly.lat_inf + excluded.lat_inf,
    refused_401 = usage_hourly.refused_401 + excluded.refused_401,
    refused_404 = usage_hourly.refused_404 + excluded.refused_404,
    refused_429 = usage_hourly.refused_429 + excluded.refused_429,
    cached_tokens = usage_hourly.cached_tokens + excluded.cached_tokens,
    refused_busy = usage_hourly.refused_busy + excluded.refused_busy,
    refused_budget = usage_hourly.refused_budget + excluded.refused_budget,
    queued = usage_hourly.queued + excluded.queued,
    queue_ms_sum = usage_hourly.queue_ms_sum + excluded.queue_ms_sum;

-- name: UsageListByDeployment :many
-- A deployment's hours in [from, to), every key's counts summed (the calls clients made: the copies svc
-- made, key '~copies' (runs.CopiesKey), are left out); hours without calls have no row.
SELECT hour,
    CAST(sum(requests) AS BIGINT) AS requests, CAST(sum(errors) AS BIGINT) AS errors,
    CAST(sum(prompt_tokens) AS BIGINT) AS prompt_tokens, CAST(sum(completion_tokens) AS BIGINT) AS completion_tokens,
    CAST(sum(latency_sum_ms) AS BIGINT) AS latency_sum_ms,
    CAST(sum(lat_25) AS BIGINT) AS lat_25, CAST(sum(lat_50) AS BIGINT) AS lat_50,
    CAST(sum(lat_100) AS BIGINT) AS lat_100, CAST(sum(lat_250) AS BIGINT) AS lat_250,
    CAST(sum(lat_500) AS BIGINT) AS lat_500, CAST(sum(lat_1000) AS BIGINT) AS lat_1000,
    CAST(sum(lat_2500) AS BIGINT) AS lat_2500, CAST(sum(lat_5000) AS BIGINT) AS lat_5000,
    CAST(sum(lat_10000) AS BIGINT) AS lat_10000, CAST(sum(lat_30000) AS BIGINT) AS lat_30000,
    CAST(sum(lat_60000) AS BIGINT) AS lat_60000, CAST(sum(lat_inf) AS BIGINT) AS lat_inf,
    CAST(sum(refused_401) AS BIGINT) AS refused_401, CAST(sum(refused_404) AS BIGINT) AS refused_404,
    CAST(sum(refused_429) AS BIGINT) AS refused_429, CAST(sum(cached_tokens) AS BIGINT) AS cached_tokens,
    CAST(sum(feedback_up) AS BIGINT) AS feedback_up, CAST(sum(feedback_down) AS BIGINT) AS feedback_down,
    CAST(sum(feedback_neutral) AS BIGINT) AS feedback_neutral,
    CAST(sum(refused_busy) AS BIGINT) AS refused_busy, CAST(sum(refused_budget) AS BIGINT) AS refused_budget,
    CAST(sum(queued) AS BIGINT) AS queued, CAST(sum(queue_ms_sum) AS BIGINT) AS queue_ms_sum
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
    CAST(sum(requests) AS BIGINT) AS requests, CAST(sum(errors) AS BIGINT) AS errors,
    CAST(sum(prompt_tokens) AS BIGINT) AS prompt_tokens, CAST(sum(completion_tokens) AS BIGINT) AS completion_tokens
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
    CAST(sum(prompt_tokens) AS BIGINT) AS prompt_tokens, CAST(sum(completion_tokens) AS BIGINT) AS completion_tokens
FROM usage_hourly
WHERE deployment_id IN (SELECT jsonb_array_elements_text(CAST(CAST(sqlc.arg(ids) AS TEXT) AS JSONB))) AND key_id != '~copies'
  AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour)
GROUP BY deployment_id
ORDER BY deployment_id;

-- name: UsageDeleteBefore :execrows
DELETE FROM usage_hourly WHERE hour < $1;

-- name: UsageFeedbackAdd :exec
-- Moves feedback counts of the hour's row of a run (each -1, 0 or 1), when a score is given or changed.
UPDATE usage_hourly SET feedback_up = feedback_up + sqlc.arg(up), feedback_down = feedback_down + sqlc.arg(down),
    feedback_neutral = feedback_neutral + sqlc.arg(neutral)
WHERE deployment_id = sqlc.arg(deployment_id) AND key_id = sqlc.arg(key_id) AND hour = sqlc.arg(hour);

-- name: UsageAnsweredInHours :one
-- The calls a deployment answered (requests less errors) in its hours in [from, to), every key's: what
-- an export compares with the runs it stores to count those it kept no transcript of.
SELECT CAST(COALESCE(sum(requests - errors), 0) AS BIGINT) AS answered
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
