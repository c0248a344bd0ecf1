-- PostgreSQL dialect of sqlite/002_anonymous_lifecycle.sql.
ALTER TABLE identities ADD COLUMN last_used_at BIGINT;
UPDATE identities SET last_used_at = floor(extract(epoch FROM now()))::bigint * 1000;

UPDATE deployments
SET anonymous = TRUE, expires_at = (floor(extract(epoch FROM now()))::bigint + 7 * 24 * 3600) * 1000
WHERE expires_at IS NULL AND deleted_at IS NULL AND project_id IN (
    SELECT p.id FROM projects AS p
    JOIN memberships AS m ON m.org_id = p.org_id
    JOIN identities AS i ON i.id = m.identity_id
    WHERE i.kind = 'anonymous');

CREATE INDEX identities_anonymous_idle ON identities (last_used_at) WHERE kind = 'anonymous';
CREATE INDEX tokens_expires ON tokens (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX tokens_identity ON tokens (identity_id);
CREATE INDEX memberships_org ON memberships (org_id);
