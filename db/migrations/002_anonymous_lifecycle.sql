-- Anonymous identities: when each was last used, so that the sweeper can delete those with no live
-- endpoint unused for 30 days; indexes for the sweeper's passes over tokens and identities.
-- Written at most once an hour per identity (core.Authenticate), never on every request.
ALTER TABLE identities ADD COLUMN last_used_at INTEGER;
UPDATE identities SET last_used_at = created_at;

CREATE INDEX identities_anonymous_idle ON identities (last_used_at) WHERE kind = 'anonymous';
CREATE INDEX tokens_expires ON tokens (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX tokens_identity ON tokens (identity_id);
CREATE INDEX memberships_org ON memberships (org_id);
