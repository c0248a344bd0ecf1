-- name: EdgeBatchAdd :execrows
-- 0 rows: the batch was applied before (its answer was lost and the edge retried).
INSERT OR IGNORE INTO edge_batches (id, runs, created_at) VALUES (?, ?, ?);

-- name: EdgeBatchPrune :execrows
DELETE FROM edge_batches WHERE created_at < ?;
