-- Anonymous identities: when each was last used, so that the sweeper can delete those with no live
-- endpoint unused for 30 days; indexes for the sweeper's passes over tokens and identities.
-- Written at most once an hour per identity (core.Authenticate), never on every request. Identities
-- that exist already count as used now: nothing recorded their use before.
ALTER TABLE identities ADD COLUMN last_used_at INTEGER;
UPDATE identities SET last_used_at = CAST(strftime('%s', 'now') AS INTEGER) * 1000;

-- Endpoints that anonymous identities created before this version (other than one-click ones) never
-- expired; they get the same lifetime as new ones, counted from now.
UPDATE deployments
SET anonymous = 1, expires_at = (CAST(strftime('%s', 'now') AS INTEGER) + 7 * 24 * 3600) * 1000
WHERE expires_at IS NULL AND deleted_at IS NULL AND project_id IN (
    SELECT p.id FROM projects AS p
    JOIN memberships AS m ON m.org_id = p.org_id
    JOIN identities AS i ON i.id = m.identity_id
    WHERE i.kind = 'anonymous');

CREATE INDEX identities_anonymous_idle ON identities (last_used_at) WHERE kind = 'anonymous';
CREATE INDEX tokens_expires ON tokens (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX tokens_identity ON tokens (identity_id);
CREATE INDEX memberships_org ON memberships (org_id);
