-- name: EdgeBatchAdd :execrows
-- 0 rows: the batch was applied before (its answer was lost and the edge retried).
INSERT INTO edge_batches (id, runs, created_at) VALUES ($1, $2, $3)
ON CONFLICT (id) DO NOTHING;

-- name: EdgeBatchPrune :execrows
DELETE FROM edge_batches WHERE created_at < $1;
