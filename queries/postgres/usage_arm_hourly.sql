-- Usage per arm of deployments with a canary (docs/API.md, "Usage by arm").

-- name: UsageArmAdd :exec
-- Adds one batch's counts of one arm to an hour's row, creating it on first use.
INSERT INTO usage_arm_hourly (
    deployment_id, canary_id, arm, arm_target, hour, requests, errors, prompt_tokens, completion_tokens,
    lat_25, lat_50, lat_100, lat_250, lat_500, lat_1000, lat_2500, lat_5000, lat_10000, lat_30000, lat_60000, lat_inf,
    ttft_25, ttft_50, ttft_100, ttft_250, ttft_500, ttft_1000, ttft_2500, ttft_5000, ttft_10000, ttft_30000, ttft_60000, ttft_inf
) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31, $32, $33)
ON CONFLICT (deployment_id, canary_id, arm, arm_target, hour) DO UPDATE SET
    requests = usage_arm_hourly.requests + excluded.requests,
    errors = usage_arm_hourly.errors + excluded.errors,
    prompt_tokens = usage_arm_hourly.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = usage_arm_hourly.completion_tokens + excluded.completion_tokens,
    lat_25 = usage_arm_hourly.lat_25 + excluded.lat_25,
    lat_50 = usage_arm_hourly.lat_50 + excluded.lat_50,
    lat_100 = usage_arm_hourly.lat_100 + excluded.lat_100,
    lat_250 = usage_arm_hourly.lat_250 + excluded.lat_250,
    lat_500 = usage_arm_hourly.lat_500 + excluded.lat_500,
    lat_1000 = usage_arm_hourly.lat_1000 + excluded.lat_1000,
    lat_2500 = usage_arm_hourly.lat_2500 + excluded.lat_2500,
    lat_5000 = usage_arm_hourly.lat_5000 + excluded.lat_5000,
    lat_10000 = usage_arm_hourly.lat_10000 + excluded.lat_10000,
    lat_30000 = usage_arm_hourly.lat_30000 + excluded.lat_30000,
    lat_60000 = usage_arm_hourly.lat_60000 + excluded.lat_60000,
    lat_inf = usage_arm_hourly.lat_inf + excluded.lat_inf,
    ttft_25 = usage_arm_hourly.ttft_25 + excluded.ttft_25,
    ttft_50 = usage_arm_hourly.ttft_50 + excluded.ttft_50,
    ttft_100 = usage_arm_hourly.ttft_100 + excluded.ttft_100,
    ttft_250 = usage_arm_hourly.ttft_250 + excluded.ttft_250,
    ttft_500 = usage_arm_hourly.ttft_500 + excluded.ttft_500,
    ttft_1000 = usage_arm_hourly.ttft_1000 + excluded.ttft_1000,
    ttft_2500 = usage_arm_hourly.ttft_2500 + excluded.ttft_2500,
    ttft_5000 = usage_arm_hourly.ttft_5000 + excluded.ttft_5000,
    ttft_10000 = usage_arm_hourly.ttft_10000 + excluded.ttft_10000,
    ttft_30000 = usage_arm_hourly.ttft_30000 + excluded.ttft_30000,
    ttft_60000 = usage_arm_hourly.ttft_60000 + excluded.ttft_60000,
    ttft_inf = usage_arm_hourly.ttft_inf + excluded.ttft_inf;

-- name: UsageArmList :many
-- A deployment's rows in hours [from, to), of one canary's calls when canary_id is not empty (of every
-- canary's otherwise), with their latency sketches: the caller sums them per arm and target, merging the
-- sketches (internal/qsketch). Hours without calls have no row.
SELECT canary_id, arm, arm_target, hour, requests, errors, prompt_tokens, completion_tokens,
    feedback_up, feedback_down, feedback_neutral,
    lat_25, lat_50, lat_100, lat_250, lat_500, lat_1000, lat_2500, lat_5000, lat_10000, lat_30000, lat_60000, lat_inf,
    ttft_25, ttft_50, ttft_100, ttft_250, ttft_500, ttft_1000, ttft_2500, ttft_5000, ttft_10000, ttft_30000, ttft_60000, ttft_inf,
    latency_sketch, ttft_sketch
FROM usage_arm_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour)
  AND (CAST(sqlc.arg(canary_id) AS TEXT) = '' OR canary_id = sqlc.arg(canary_id))
ORDER BY arm, arm_target, hour;

-- name: UsageArmSketches :one
-- The sketches of a row and its requests, within the transaction that just added to it (UsageArmAdd
-- holds the row's lock on PostgreSQL): the recorder merges a batch's sketches into them.
SELECT requests, latency_sketch, ttft_sketch FROM usage_arm_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND canary_id = sqlc.arg(canary_id) AND arm = sqlc.arg(arm)
  AND arm_target = sqlc.arg(arm_target) AND hour = sqlc.arg(hour);

-- name: UsageArmSketchesSet :exec
UPDATE usage_arm_hourly SET latency_sketch = sqlc.arg(latency_sketch), ttft_sketch = sqlc.arg(ttft_sketch)
WHERE deployment_id = sqlc.arg(deployment_id) AND canary_id = sqlc.arg(canary_id) AND arm = sqlc.arg(arm)
  AND arm_target = sqlc.arg(arm_target) AND hour = sqlc.arg(hour);

-- name: UsageArmDeleteBefore :execrows
DELETE FROM usage_arm_hourly WHERE hour < $1;

-- name: UsageArmFeedbackAdd :exec
-- Moves feedback counts of the hour's row of a scored run's arm (each -1, 0 or 1), as UsageFeedbackAdd.
UPDATE usage_arm_hourly SET feedback_up = feedback_up + sqlc.arg(up), feedback_down = feedback_down + sqlc.arg(down),
    feedback_neutral = feedback_neutral + sqlc.arg(neutral)
WHERE deployment_id = sqlc.arg(deployment_id) AND canary_id = sqlc.arg(canary_id) AND arm = sqlc.arg(arm)
  AND arm_target = sqlc.arg(arm_target) AND hour = sqlc.arg(hour);

-- name: UsageArmAnsweredInHours :one
-- The calls one arm of a deployment answered (requests less errors) in its hours in [from, to), every
-- target's, as UsageAnsweredInHours.
SELECT CAST(COALESCE(sum(requests - errors), 0) AS BIGINT) AS answered
FROM usage_arm_hourly
WHERE deployment_id = sqlc.arg(deployment_id) AND arm = sqlc.arg(arm)
  AND hour >= sqlc.arg(from_hour) AND hour < sqlc.arg(to_hour);
