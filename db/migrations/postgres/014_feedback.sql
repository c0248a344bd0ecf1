-- PostgreSQL dialect of sqlite/014_feedback.sql.
ALTER TABLE runs ADD COLUMN feedback_score BIGINT;
ALTER TABLE runs ADD COLUMN feedback_comment TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN feedback_at BIGINT;
ALTER TABLE usage_hourly ADD COLUMN feedback_up BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN feedback_down BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_hourly ADD COLUMN feedback_neutral BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_arm_hourly ADD COLUMN feedback_up BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_arm_hourly ADD COLUMN feedback_down BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_arm_hourly ADD COLUMN feedback_neutral BIGINT NOT NULL DEFAULT 0;
