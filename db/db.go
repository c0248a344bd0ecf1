// Package db opens the store (a SQLite file, or a PostgreSQL database for replicas), applies the
// embedded migrations of its engine under a lock, hands out the generated queries of that engine behind
// one interface (Querier), and maps both drivers' errors to the few sentinel errors the domain layer
// understands.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	// ErrNotFound is returned for a query that matched no row.
	ErrNotFound = errors.New("db: not found")
	// ErrUnique is returned when an insert or update violates a unique constraint.
	ErrUnique = errors.New("db: unique constraint violated")
)

// Engine names a database engine.
type Engine string

const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
)

// EngineOf returns the engine behind a handle opened by this package (or by sql.Open with either
// driver).
func EngineOf(sqldb *sql.DB) Engine {
	if _, ok := sqldb.Driver().(*stdlib.Driver); ok {
		return Postgres
	}
	return SQLite
}

// IsPostgresURL reports whether --database names a PostgreSQL database rather than a SQLite file.
func IsPostgresURL(database string) bool {
	return strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://")
}

// OpenDatabase opens what --database names: "" is svc.db in dataDir (Open), a postgres:// URL is a
// PostgreSQL database (OpenPostgres), anything else the path of a SQLite file.
func OpenDatabase(ctx context.Context, database, dataDir string, log *slog.Logger) (*sql.DB, error) {
	switch {
	case database == "":
		return Open(ctx, dataDir, log)
	case IsPostgresURL(database):
		return OpenPostgres(ctx, database)
	default:
		return openSQLite(ctx, filepath.Clean(database), log)
	}
}

// Tx runs fn in a transaction, committing if it returns nil and rolling back otherwise. Transactions
// are serialised on both engines, so that a rule checked by a read (a count against a limit, say)
// still holds when the write after it commits: SQLite's transactions take the write lock when they
// begin; PostgreSQL's take the store's write lock (WriteLockKey) first, for every replica.
func Tx(ctx context.Context, sqldb *sql.DB, fn func(tx *sql.Tx) error) error {
	return Write(ctx, sqldb, func(w *WriteTx) error { return fn(w.Tx) })
}

// A WriteTx is a transaction of Tx's kind on a connection of its own, which InsertRuns uses to copy a
// batch of runs in bulk on PostgreSQL (runbatch.go). On SQLite each distinct statement it executes is
// prepared once per transaction (ExecContext).
type WriteTx struct {
	*sql.Tx
	conn   *sql.Conn
	engine Engine
	stmts  map[string]*sql.Stmt // SQLite: the statements prepared in this transaction, by query
}

// ExecContext executes query in the transaction. On SQLite it runs from a statement prepared once per
// transaction, so that a batch compiles its INSERT once instead of once per run (which was most of the
// recorder's CPU); the statements close with the transaction. PostgreSQL's driver caches its
// statements itself.
func (w *WriteTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if w.engine == Postgres {
		return w.Tx.ExecContext(ctx, query, args...)
	}
	st, ok := w.stmts[query]
	if !ok {
		var err error
		if st, err = w.Tx.PrepareContext(ctx, query); err != nil {
			return nil, err
		}
		if w.stmts == nil {
			w.stmts = map[string]*sql.Stmt{}
		}
		w.stmts[query] = st
	}
	return st.ExecContext(ctx, args...)
}

// Shared reports whether the store may be shared by replicas of svc server (PostgreSQL), rather than
// owned by one process beside its files (SQLite).
func Shared(sqldb *sql.DB) bool { return EngineOf(sqldb) == Postgres }

// Write is Tx with the WriteTx, for the recorder's batches of runs.
func Write(ctx context.Context, sqldb *sql.DB, fn func(tx *WriteTx) error) error {
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return Map(err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return Map(err)
	}
	e := EngineOf(sqldb)
	if e == Postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", WriteLockKey); err != nil {
			_ = tx.Rollback()
			return Map(err)
		}
	}
	if err := fn(&WriteTx{Tx: tx, conn: conn, engine: e}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return Map(tx.Commit())
}

// Map turns "no rows" into ErrNotFound and unique or primary-key violations into ErrUnique (wrapping a
// description of the constraint, "UNIQUE constraint failed: table.column, ..." on both engines, so that
// UniqueOn can tell which rule was broken; never the values); other errors pass through.
func Map(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	var serr *sqlite.Error
	if errors.As(err, &serr) {
		switch serr.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %v", ErrUnique, serr)
		}
	}
	var perr *pgconn.PgError
	if errors.As(err, &perr) && perr.Code == "23505" { // unique_violation
		return fmt.Errorf("%w: UNIQUE constraint failed: %s", ErrUnique, pgUniqueColumns(perr))
	}
	return err
}

// pgUniqueColumns names the columns of a PostgreSQL unique violation as SQLite does ("t.a, t.b"). The
// columns come from the detail, "Key (a, b)=(values) already exists.": the values are left out, as
// SQLite leaves them out, because they may be labels or emails that logs should not carry.
func pgUniqueColumns(e *pgconn.PgError) string {
	cols, ok := strings.CutPrefix(e.Detail, "Key (")
	if i := strings.Index(cols, ")="); ok && i > 0 {
		parts := strings.Split(cols[:i], ", ")
		for j, p := range parts {
			parts[j] = e.TableName + "." + p
		}
		return strings.Join(parts, ", ")
	}
	return e.TableName + " (" + e.ConstraintName + ")"
}

// UniqueOn reports whether err is a unique violation whose message names the given column or index
// (for example "deployments.slug"), so that callers can tell which rule was broken.
func UniqueOn(err error, what string) bool {
	return errors.Is(err, ErrUnique) && strings.Contains(err.Error(), what)
}
