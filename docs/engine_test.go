package docs

import (
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
	inDB := func(dir string) bool { return dir == "db" || strings.HasPrefix(dir, "db/") }
	eachGoLine(t, inDB, func(rel string, n int, line string) {
		if asksEngine.MatchString(line) {
			t.Errorf("%s:%d asks for the store's engine or writes runs itself: put the difference in db (db.Shared, db.InsertRuns)\n\t%s", rel, n, strings.TrimSpace(line))
		}
	})
}
