package db

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// An anonymous identity's endpoints from before migration 002 never expired; after it they expire 7
// days from the upgrade, and the identity counts as used at the upgrade.
func TestMigration002ExpiresOldAnonymousEndpoints(t *testing.T) {
	ctx := context.Background()
	sqldb, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "old.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	v1, _ := migrations.ReadFile("migrations/sqlite/001_init.sql")
	if _, err := sqldb.Exec(string(v1) + `; PRAGMA user_version = 1;
		INSERT INTO identities (id, kind, created_at) VALUES ('anon', 'anonymous', 1), ('ann', 'user', 1);
		INSERT INTO orgs (id, slug, created_at) VALUES ('o1', 'anon-1', 1), ('o2', 'acme', 1);
		INSERT INTO memberships (identity_id, org_id, created_at) VALUES ('anon', 'o1', 1), ('ann', 'o2', 1);
		INSERT INTO projects (id, org_id, slug, created_at) VALUES ('p1', 'o1', 'default', 1), ('p2', 'o2', 'web', 1);
		INSERT INTO deployments (id, slug, project_id, target_kind, auth_mode, enabled, run_retention_mode, run_retention_days, anonymous, created_at, updated_at)
		VALUES ('d1', 'squatted', 'p1', 'multi_model', 'none', 1, 'days', 7, 0, 1, 1),
		       ('d2', 'owned', 'p2', 'multi_model', 'none', 1, 'days', 7, 0, 1, 1);`); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if err := Migrate(ctx, sqldb); err != nil {
		t.Fatal(err)
	}
	var squatted, owned sql.NullInt64
	sqldb.QueryRow(`SELECT expires_at FROM deployments WHERE id = 'd1'`).Scan(&squatted)
	sqldb.QueryRow(`SELECT expires_at FROM deployments WHERE id = 'd2'`).Scan(&owned)
	week := 7 * 24 * time.Hour
	if !squatted.Valid || squatted.Int64 < before.Add(week).UnixMilli()-1000 || squatted.Int64 > time.Now().Add(week).UnixMilli()+1000 {
		t.Fatalf("the old anonymous endpoint expires at %v, want about a week from now", squatted)
	}
	if owned.Valid {
		t.Fatalf("a user's endpoint got an expiry: %v", owned)
	}
	var used int64
	sqldb.QueryRow(`SELECT last_used_at FROM identities WHERE id = 'anon'`).Scan(&used)
	if used < before.UnixMilli()-1000 {
		t.Fatalf("last_used_at of an existing identity = %d, want the upgrade time", used)
	}
}

// Migration 016 keeps what it finds: a canary running at the upgrade becomes a canary of the history
// (its id on the deployment, started at the upgrade), and the usage by arm recorded before it moves to
// the table keyed by canary, as no canary's (an empty canary_id) and without a sketch, so it is estimated as before.
func TestMigration016KeepsTheRunningCanaryAndTheArmsUsage(t *testing.T) {
	ctx := context.Background()
	sqldb, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "old.db")+"?_pragma=foreign_keys(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	list, err := migrationsOf(SQLite)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list {
		if m.version >= 16 {
			break
		}
		body, _ := migrations.ReadFile(m.name)
		if _, err := sqldb.Exec(string(body) + fmt.Sprintf("; PRAGMA user_version = %d;", m.version)); err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
	}
	lat := strings.Repeat(", 0", 24)
	if _, err := sqldb.Exec(`
		INSERT INTO orgs (id, slug, created_at) VALUES ('o1', 'acme', 1);
		INSERT INTO projects (id, org_id, slug, created_at) VALUES ('p1', 'o1', 'web', 1);
		INSERT INTO deployments (id, slug, project_id, target_kind, target_model, auth_mode, enabled, run_retention_mode, run_retention_days, anonymous, created_at, updated_at,
			canary_kind, canary_model, canary_percent, canary_mode)
		VALUES ('d1', 'canaried', 'p1', 'base_model', 'm', 'none', 1, 'days', 7, 0, 1, 1, 'base_model', 'm2', 20, 'split'),
		       ('d2', 'plain', 'p1', 'base_model', 'm', 'none', 1, 'days', 7, 0, 1, 1, NULL, NULL, NULL, NULL);
		INSERT INTO usage_arm_hourly VALUES ('d1', 'canary', 'm2', 3600000, 5, 1, 10, 20` + lat + `, 2, 1, 0);`); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	if err := Migrate(ctx, sqldb); err != nil {
		t.Fatal(err)
	}
	var id, outcome string
	var started int64
	if err := sqldb.QueryRow(`SELECT c.id, c.outcome, c.started_at FROM canaries c JOIN deployments d ON d.canary_id = c.id AND d.id = 'd1'
		WHERE c.kind = 'base_model' AND c.model = 'm2' AND c.percent = 20 AND c.mode = 'split'`).Scan(&id, &outcome, &started); err != nil {
		t.Fatalf("the running canary is not in the history: %v", err)
	}
	if outcome != "" || started < before.UnixMilli() {
		t.Fatalf("canary %s: outcome %q, started %d (upgrade at %d)", id, outcome, started, before.UnixMilli())
	}
	var n int
	sqldb.QueryRow(`SELECT count(*) FROM canaries WHERE deployment_id = 'd2'`).Scan(&n)
	if n != 0 {
		t.Fatal("a deployment without a canary got one in the history")
	}
	var canary string
	var requests, up int64
	var sketch []byte
	if err := sqldb.QueryRow(`SELECT canary_id, requests, feedback_up, latency_sketch FROM usage_arm_hourly WHERE deployment_id = 'd1'`).
		Scan(&canary, &requests, &up, &sketch); err != nil || canary != "" || requests != 5 || up != 2 || sketch != nil {
		t.Fatalf("the arm's usage after the migration: canary %q requests %d up %d sketch %v: %v", canary, requests, up, sketch, err)
	}
}
