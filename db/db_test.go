package db

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenTightensTheDataFolderAndDatabaseFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// A data folder and database left readable by everyone (by an older version, or by hand).
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask did
		t.Fatal(err)
	}
	first, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	for _, p := range []string{filepath.Join(dir, "svc.db")} {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	sqldb, err := Open(context.Background(), dir, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	// A write, so that SQLite creates its -wal and -shm files beside the database.
	if _, err := sqldb.Exec(`INSERT INTO orgs (id, slug, created_at) VALUES ('o', 'o', 1)`); err != nil {
		t.Fatal(err)
	}
	want := map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "svc.db"): 0o600,
		filepath.Join(dir, "svc.db-wal"): 0o600, filepath.Join(dir, "svc.db-shm"): 0o600}
	for p, mode := range want {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", filepath.Base(p), fi.Mode().Perm(), mode)
		}
	}
	for _, said := range []string{"tightened permissions", filepath.Join(dir, "svc.db"), "was=-rw-r--r--"} {
		if !strings.Contains(logs.String(), said) {
			t.Errorf("log does not say %q:\n%s", said, logs.String())
		}
	}
}

func TestOpenCreatesPrivateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh")
	sqldb, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	for p, mode := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "svc.db"): 0o600} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v %v, want %v", p, fi.Mode().Perm(), err, mode)
		}
	}
}
