// Package db opens the SQLite database, applies the embedded migrations, and maps SQLite errors
// to the few sentinel errors the domain layer understands.
package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/svcdev/svc/db/dbsqlc"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Q is the one set of generated queries; each method takes the DB or transaction to run on.
var Q = dbsqlc.New()

var (
	// ErrNotFound is returned for a query that matched no row.
	ErrNotFound = errors.New("db: not found")
	// ErrUnique is returned when an insert or update violates a unique constraint.
	ErrUnique = errors.New("db: unique constraint violated")
)

// Open opens (creating if needed) the SQLite file in dir and brings its schema up to date. The folder
// is made 0700 and the database files 0600, whatever they were before: they hold key hashes, tokens'
// hashes and every recorded request. Each tightening is logged on log (nil: not logged).
func Open(ctx context.Context, dir string, log *slog.Logger) (*sql.DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	if err := tighten(dir, 0o700, log); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "svc.db")
	// Created here with 0600 before SQLite opens it: SQLite gives the -wal and -shm files the mode of
	// the database file.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := tighten(p, 0o600, log); err != nil {
			return nil, err
		}
	}
	return OpenFile(ctx, path)
}

// tighten removes permission bits of path beyond mode (a missing path is fine).
func tighten(path string, mode os.FileMode, log *slog.Logger) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&^mode == 0 {
		return nil
	}
	if err := os.Chmod(path, fi.Mode().Perm()&mode); err != nil {
		return fmt.Errorf("restrict the permissions of %s to %v: %w", path, mode, err)
	}
	if log != nil {
		log.Warn("tightened permissions of the data folder", "path", path, "was", fi.Mode().Perm().String(), "now", (fi.Mode().Perm() & mode).String())
	}
	return nil
}

// OpenFile opens the SQLite database at path and applies pending migrations.
func OpenFile(ctx context.Context, path string) (*sql.DB, error) {
	// Immediate transactions take the write lock up front, so a read-then-write transaction waits on
	// busy_timeout instead of failing with SQLITE_BUSY when another writer got there first.
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)" +
		"&_pragma=synchronous(NORMAL)&_txlock=immediate"
	sqldb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	sqldb.SetMaxOpenConns(8)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	if err := Migrate(ctx, sqldb); err != nil {
		sqldb.Close()
		return nil, err
	}
	return sqldb, nil
}

// Migrate applies every embedded migration newer than the database's user_version, each in its own
// transaction, in the order of their numeric prefixes.
func Migrate(ctx context.Context, sqldb *sql.DB) error {
	entries, err := fs.ReadDir(migrations, "migrations")
	if err != nil {
		return err
	}
	type migration struct {
		version int
		name    string
	}
	var list []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return fmt.Errorf("migration %q: name must start with a number and an underscore", e.Name())
		}
		list = append(list, migration{v, e.Name()})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].version < list[j].version })

	var current int
	if err := sqldb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	for _, m := range list {
		if m.version <= current {
			continue
		}
		body, err := migrations.ReadFile("migrations/" + m.name)
		if err != nil {
			return err
		}
		err = Tx(ctx, sqldb, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
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

// Tx runs fn in a transaction, committing if it returns nil and rolling back otherwise.
func Tx(ctx context.Context, sqldb *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := sqldb.BeginTx(ctx, nil)
	if err != nil {
		return Map(err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return Map(tx.Commit())
}

// Map turns "no rows" into ErrNotFound and unique or primary-key violations into ErrUnique (wrapping
// the driver's error so that its constraint text stays available to logs); other errors pass through.
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
	return err
}

// UniqueOn reports whether err is a unique violation whose message names the given column or index
// (for example "deployments.slug"), so that callers can tell which rule was broken.
func UniqueOn(err error, what string) bool {
	return errors.Is(err, ErrUnique) && strings.Contains(err.Error(), what)
}
