package db

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql
)

// Advisory lock keys of svc on PostgreSQL (one namespace per database; the values are arbitrary).
const (
	// WriteLockKey serialises svc's transactions across replicas (db.Tx) and orders the change feed
	// (queries/postgres/edge_changes.sql names the same number).
	WriteLockKey int64 = 7309851262937042790
	// MigrateLockKey is held while migrations run, so that replicas starting together migrate once.
	MigrateLockKey int64 = 7309851262937042791
	// LeaderLockKey is held by the replica that runs background work (RunAsLeader).
	LeaderLockKey int64 = 7309851262937042792
)

// MinPostgresVersion is the oldest PostgreSQL svc runs on (server_version_num).
const MinPostgresVersion = 150000

// OpenPostgres connects to the PostgreSQL database at rawURL (postgres://user:password@host:5432/db)
// through pgx, checks its version and brings its schema up to date.
func OpenPostgres(ctx context.Context, rawURL string) (*sql.DB, error) {
	where := redactURL(rawURL)
	sqldb, err := sql.Open("pgx", rawURL)
	if err != nil {
		return nil, fmt.Errorf("open PostgreSQL at %s: %w", where, err)
	}
	// Two connections stay busy for the life of the process (the leader lock and LISTEN).
	sqldb.SetMaxOpenConns(24)
	sqldb.SetMaxIdleConns(24) // as many as open: a connection closed on release is a backend forked again
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	pingCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var version int
	if err := sqldb.QueryRowContext(pingCtx, "SELECT current_setting('server_version_num')::int").Scan(&version); err != nil {
		sqldb.Close()
		return nil, fmt.Errorf("connect to PostgreSQL at %s: %w", where, err)
	}
	if version < MinPostgresVersion {
		sqldb.Close()
		return nil, fmt.Errorf("PostgreSQL at %s is version %d.%d: svc needs 15 or newer", where, version/10000, version%10000)
	}
	if err := Migrate(ctx, sqldb); err != nil {
		sqldb.Close()
		return nil, err
	}
	return sqldb, nil
}

// Describe names what --database names, for logs: the URL without its password, or the path.
func Describe(database string) string {
	if IsPostgresURL(database) {
		return redactURL(database)
	}
	return database
}

// redactURL returns the database URL without its password, for errors and logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	return u.Redacted()
}
