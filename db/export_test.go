package db

import (
	"context"
	"database/sql"
)

// Test-only access to the schema.

// SchemaVersion returns the number of the newest migration applied to the database.
func SchemaVersion(ctx context.Context, sqldb *sql.DB) (int, error) {
	q := "PRAGMA user_version"
	if EngineOf(sqldb) == Postgres {
		q = "SELECT coalesce(max(version), 0) FROM svc_schema_migrations"
	}
	var v int
	err := sqldb.QueryRowContext(ctx, q).Scan(&v)
	return v, err
}

// RunColumns are the columns a batch of runs is copied into on PostgreSQL.
func RunColumns() []string { return runColumns }
