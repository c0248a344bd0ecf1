package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"
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
	return openSQLite(ctx, filepath.Join(dir, "svc.db"), log)
}

// openSQLite opens the SQLite file at path, creating it (and its folder, 0700) when missing, with the
// database files made 0600.
func openSQLite(ctx context.Context, path string, log *slog.Logger) (*sql.DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create the database's folder: %w", err)
	}
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
