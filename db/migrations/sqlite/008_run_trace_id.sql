-- The trace id of a run, when tracing is on (docs/OPERATIONS.md, "Tracing"): the caller's when it sent a
-- traceparent, else the one the edge began; "" when tracing is off.
ALTER TABLE runs ADD COLUMN trace_id TEXT NOT NULL DEFAULT '';
