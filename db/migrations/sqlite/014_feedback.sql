-- Feedback on a run (docs/API.md, "Feedback"): its score (-1, 0 or 1; NULL: none given), comment and
-- time, kept with the run and removed with it; the hourly usage counts the scores given to the hour's
-- runs, moved from one count to another when a score changes.
ALTER TABLE runs ADD COLUMN feedback_score INTEGER;
ALTER TABLE runs ADD COLUMN feedback_comment TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN feedback_at INTEGER;
ALTER TABLE usage_hourly ADD COLUMN feedback_up INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN feedback_down INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN feedback_neutral INTEGER NOT NULL DEFAULT 0;
-- The export pages through a deployment's runs oldest first, by (created_at, id): runs_deployment
-- (deployment_id, created_at DESC, id DESC) serves that order read backwards.
-- The same counts per canary arm, for the arms of the runs scored.
ALTER TABLE usage_arm_hourly ADD COLUMN feedback_up INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_arm_hourly ADD COLUMN feedback_down INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_arm_hourly ADD COLUMN feedback_neutral INTEGER NOT NULL DEFAULT 0;
