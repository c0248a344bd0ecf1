package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// asksEngine matches Go outside db that asks which engine the store runs on, or writes a run with a
// query of its own instead of db.InsertRuns.
var asksEngine = regexp.MustCompile(`\bdb\.(EngineOf|Postgres|SQLite|IsPostgresURL)\b|\.RunCreate(IfAbsent)?\(`)

// TestOnlyDBKnowsTheEngine fails when a package other than db (tests apart) branches on the store's
// engine or writes runs itself: the engine's differences live in db (ARCHITECTURE.md's package table:
// InsertRuns, the one writer of runs on both engines, and Shared), so that the recorder writes runs one
// way on both.
func TestOnlyDBKnowsTheEngine(t *testing.T) {
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "node_modules" || rel == "db" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if asksEngine.MatchString(line) {
				t.Errorf("%s:%d asks for the store's engine or writes runs itself: put the difference in db (db.Shared, db.InsertRuns)\n\t%s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
