package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The migrations of each engine, numbered alike: migration N of one engine and of the other make the
// same change, each in its own dialect (a test checks that both folders hold the same numbers).
//
//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

type migration struct {
	version int
	name    string // path in migrations
}

// migrationsOf lists the engine's migrations in the order of their numeric prefixes.
func migrationsOf(engine Engine) ([]migration, error) {
	dir := "migrations/" + string(engine)
	entries, err := fs.ReadDir(migrations, dir)
	if err != nil {
		return nil, err
	}
	var list []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migration %q: name must start with a number and an underscore", e.Name())
		}
		list = append(list, migration{v, dir + "/" + e.Name()})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].version < list[j].version })
	for i := 1; i < len(list); i++ {
		if list[i].version == list[i-1].version {
			return nil, fmt.Errorf("migrations %q and %q have the same number", list[i-1].name, list[i].name)
		}
	}
	return list, nil
}

// Migrate applies every embedded migration of the database's engine that it has not applied yet, each
// in its own transaction, in the order of their numeric prefixes. Processes that start together on one
// database take turns: on SQLite each migration's transaction holds the write lock while it reads the
// schema version; on PostgreSQL the whole run holds MigrateLockKey, a session advisory lock.
func Migrate(ctx context.Context, sqldb *sql.DB) error {
	engine := EngineOf(sqldb)
	list, err := migrationsOf(engine)
	if err != nil {
		return err
	}
	if engine == Postgres {
		return migratePostgres(ctx, sqldb, list)
	}
	for _, m := range list {
		err := Tx(ctx, sqldb, func(tx *sql.Tx) error {
			var current int
			if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
				return fmt.Errorf("read schema version: %w", err)
			}
			if m.version <= current {
				return nil
			}
			if err := execMigration(ctx, tx, m); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.version))
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}

func execMigration(ctx context.Context, tx *sql.Tx, m migration) error {
	body, err := migrations.ReadFile(m.name)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, string(body))
	return err
}

// migratePostgres applies the migrations on one connection that holds MigrateLockKey throughout. The
// versions applied are rows of svc_schema_migrations (PostgreSQL has no user_version).
func migratePostgres(ctx context.Context, sqldb *sql.DB, list []migration) (err error) {
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", MigrateLockKey); err != nil {
		return fmt.Errorf("migrations: take the migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, uerr := conn.ExecContext(uctx, "SELECT pg_advisory_unlock($1)", MigrateLockKey); uerr != nil {
			// A connection that may still hold the lock must not go back to the pool: closing it
			// releases the lock.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS svc_schema_migrations (
		version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	var current int
	if err := conn.QueryRowContext(ctx, "SELECT coalesce(max(version), 0) FROM svc_schema_migrations").Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	for _, m := range list {
		if m.version <= current {
			continue
		}
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		err = execMigration(ctx, tx, m)
		if err == nil {
			_, err = tx.ExecContext(ctx, "INSERT INTO svc_schema_migrations (version, applied_at) VALUES ($1, $2)", m.version, time.Now().UnixMilli())
		}
		if err == nil {
			err = tx.Commit()
		} else {
			_ = tx.Rollback()
		}
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
	}
	return nil
}
