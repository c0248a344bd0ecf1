package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbpg"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/db/storetest"
	"github.com/svcdev/svc/internal/edgemodel"
)

// The tests of this file run on SQLite, then on PostgreSQL (storetest.Main).
func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// shape spells a type with the generated package's name left out, and a struct with its fields, so that
// the two engines' types compare equal when they line up.
func shape(t reflect.Type) string {
	if t.Kind() == reflect.Slice && t.Name() == "" {
		return "[]" + shape(t.Elem())
	}
	if t.Kind() != reflect.Struct || !strings.Contains(t.PkgPath(), "/db/db") {
		return t.String()
	}
	fields := make([]string, t.NumField())
	for i := range fields {
		fields[i] = t.Field(i).Name + " " + t.Field(i).Type.String()
	}
	return t.Name() + "{" + strings.Join(fields, "; ") + "}"
}

func signature(m reflect.Method) string {
	var in, out []string
	for i := 2; i < m.Type.NumIn(); i++ { // after the context and the DBTX
		in = append(in, shape(m.Type.In(i)))
	}
	for i := 0; i < m.Type.NumOut(); i++ {
		out = append(out, shape(m.Type.Out(i)))
	}
	return m.Name + "(" + strings.Join(in, ", ") + ") (" + strings.Join(out, ", ") + ")"
}

// Both engines' query sets have the same names, parameters and rows: the adapter converts between
// them (its compilation checks it too), and a query written for one engine only would be a feature
// that works on one.
func TestQuerySetsOfBothEnginesMatch(t *testing.T) {
	sq := reflect.TypeOf((*dbsqlc.Querier)(nil)).Elem()
	pg := reflect.TypeOf((*dbpg.Querier)(nil)).Elem()
	if sq.NumMethod() < 60 {
		t.Fatalf("only %d queries in dbsqlc.Querier", sq.NumMethod())
	}
	for i := 0; i < sq.NumMethod(); i++ {
		m := sq.Method(i)
		pm, ok := pg.MethodByName(m.Name)
		if !ok {
			t.Errorf("queries/postgres lacks %s", m.Name)
			continue
		}
		if a, b := signature(m), signature(pm); a != b {
			t.Errorf("the engines' queries differ:\nsqlite:   %s\npostgres: %s", a, b)
		}
	}
	for i := 0; i < pg.NumMethod(); i++ {
		if _, ok := sq.MethodByName(pg.Method(i).Name); !ok {
			t.Errorf("queries/sqlite lacks %s", pg.Method(i).Name)
		}
	}
}

// Migration N exists for both engines.
func TestMigrationsOfBothEnginesAreNumberedAlike(t *testing.T) {
	names := func(engine string) []string {
		entries, err := os.ReadDir("migrations/" + engine)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	if a, b := names("sqlite"), names("postgres"); !reflect.DeepEqual(a, b) {
		t.Fatalf("migrations differ:\nsqlite:   %v\npostgres: %v", a, b)
	}
}

func TestSchemaIsAtTheNewestMigration(t *testing.T) {
	sqldb := storetest.Open(t)
	if got := db.EngineOf(sqldb); got != storetest.Engine() {
		t.Fatalf("EngineOf = %s in the %s pass", got, storetest.Engine())
	}
	entries, _ := os.ReadDir("migrations/sqlite")
	newest, _ := strconv.Atoi(strings.SplitN(entries[len(entries)-1].Name(), "_", 2)[0])
	v, err := db.SchemaVersion(context.Background(), sqldb)
	if err != nil || v != newest {
		t.Fatalf("schema version %d (%v), want %d", v, err, newest)
	}
	// Migrating again changes nothing.
	if err := db.Migrate(context.Background(), sqldb); err != nil {
		t.Fatal(err)
	}
	if v, _ := db.SchemaVersion(context.Background(), sqldb); v != newest {
		t.Fatalf("schema version %d after a second Migrate", v)
	}
}

// Driver errors become the same domain errors on both engines, naming the broken rule's columns.
func TestDriverErrorsMapToDomainErrors(t *testing.T) {
	ctx := context.Background()
	sqldb := storetest.Open(t)
	q := db.For(sqldb)
	_, err := q.OrgGetBySlug(ctx, sqldb, "nobody")
	if !errors.Is(db.Map(err), db.ErrNotFound) {
		t.Fatalf("missing row: %v, want ErrNotFound", db.Map(err))
	}
	if err := q.OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o1", Slug: "acme", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	err = db.Map(q.OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o2", Slug: "acme", CreatedAt: 1}))
	if !errors.Is(err, db.ErrUnique) || !db.UniqueOn(err, "orgs.slug") {
		t.Fatalf("second org named acme: %v, want ErrUnique on orgs.slug", err)
	}
	if err := q.ProjectCreate(ctx, sqldb, dbsqlc.ProjectCreateParams{ID: "p1", OrgID: "o1", Slug: "web", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	err = db.Map(q.ProjectCreate(ctx, sqldb, dbsqlc.ProjectCreateParams{ID: "p2", OrgID: "o1", Slug: "web", CreatedAt: 1}))
	if !db.UniqueOn(err, "projects.org_id, projects.slug") {
		t.Fatalf("second project named web: %v, want ErrUnique on projects.org_id, projects.slug", err)
	}
	err = db.Map(q.OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o1", Slug: "other", CreatedAt: 1}))
	if !db.UniqueOn(err, "orgs.id") {
		t.Fatalf("a second org o1: %v, want ErrUnique on orgs.id", err)
	}
	// The values are not in the error (they may be labels or emails, and errors reach logs).
	if strings.Contains(err.Error(), "other") {
		t.Fatalf("the error carries the value: %v", err)
	}
}

// Text PostgreSQL's TEXT refuses (a NUL, invalid UTF-8) answers what SQLite answers: a read by it
// matches no row, one by it among others finds the others, and neither aborts the transaction it runs
// in (the next statement still works); on PostgreSQL a write of it is ErrInvalidText, a 400.
func TestTextPostgreSQLRefusesMatchesNoRow(t *testing.T) {
	ctx := context.Background()
	sqldb := storetest.Open(t)
	q := db.For(sqldb)
	if err := q.OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o1", Slug: "acme", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	err := db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
		for _, bad := range []string{"\x00", "acme\x00", "\xff", "a\xc3\x28"} {
			if _, err := q.OrgGetBySlug(ctx, tx, bad); !errors.Is(db.Map(err), db.ErrNotFound) {
				t.Errorf("org %q: %v, want ErrNotFound", bad, err)
			}
			if ids, err := q.OrgListIDsByIdentity(ctx, tx, bad); err != nil || len(ids) != 0 {
				t.Errorf("orgs of identity %q: %v %v, want none", bad, ids, err)
			}
		}
		_, err := q.OrgGetBySlug(ctx, tx, "acme")
		return err
	})
	if err != nil {
		t.Fatalf("the transaction after the reads: %v", err)
	}
	err = q.OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o2", Slug: "a\x00b", CreatedAt: 1})
	if storetest.Engine() == db.Postgres && (!errors.Is(err, db.ErrInvalidText) || edgemodel.CodeOf(err) != edgemodel.CodeInvalidRequest) {
		t.Fatalf("an org slug with a NUL on PostgreSQL: %v, want ErrInvalidText", err)
	}
}

// A rule checked by a read still holds when the write after it commits: transactions take turns, on
// PostgreSQL across every connection (and so every replica) as on SQLite.
func TestTransactionsTakeTurns(t *testing.T) {
	ctx := context.Background()
	sqldb := storetest.Open(t)
	q := db.For(sqldb)
	if err := q.OrgCreate(ctx, sqldb, dbsqlc.OrgCreateParams{ID: "o", Slug: "o", CreatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	// Each writer creates a project only if the org has fewer than 3: 8 at once must stop at 3.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
				list, err := q.ProjectListByOrg(ctx, tx, "o")
				if err != nil || len(list) >= 3 {
					return err
				}
				time.Sleep(20 * time.Millisecond) // widen the window between the check and the write
				return q.ProjectCreate(ctx, tx, dbsqlc.ProjectCreateParams{ID: fmt.Sprint("p", i), OrgID: "o", Slug: fmt.Sprint("s", i), CreatedAt: 1})
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	list, _ := q.ProjectListByOrg(ctx, sqldb, "o")
	if len(list) != 3 {
		t.Fatalf("%d projects, want 3: a check and its write were interleaved", len(list))
	}
}

// Feed rows become visible in the order of their ids, without gaps: a change added while a
// transaction that added one is still open waits for it and gets the next id, so that a follower
// reading "id > after" never steps over a change that commits late; a change rolled back takes no id.
func TestFeedRowsCommitInTheOrderOfTheirIds(t *testing.T) {
	ctx := context.Background()
	sqldb := storetest.Open(t)
	q := db.For(sqldb)
	rollback := errors.New("rolled back")
	err := db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
		if err := q.EdgeChangeAdd(ctx, tx, dbsqlc.EdgeChangeAddParams{Slug: "never", CreatedAt: 1}); err != nil {
			return err
		}
		return rollback
	})
	if !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	inTx, release := make(chan struct{}), make(chan struct{})
	txDone := make(chan error, 1)
	go func() {
		txDone <- db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
			if err := q.EdgeChangeAdd(ctx, tx, dbsqlc.EdgeChangeAddParams{Slug: "first", CreatedAt: 1}); err != nil {
				return err
			}
			close(inTx)
			<-release
			return nil
		})
	}()
	<-inTx
	addDone := make(chan error, 1)
	go func() {
		addDone <- db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
			return q.EdgeChangeAdd(ctx, tx, dbsqlc.EdgeChangeAddParams{Slug: "second", CreatedAt: 2})
		})
	}()
	select {
	case err := <-addDone:
		t.Fatalf("a change was added while an earlier one was uncommitted (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-txDone; err != nil {
		t.Fatal(err)
	}
	if err := <-addDone; err != nil {
		t.Fatal(err)
	}
	rows, err := q.EdgeChangeListAfter(ctx, sqldb, dbsqlc.EdgeChangeListAfterParams{After: 0, Lim: 10})
	if err != nil || len(rows) != 2 || rows[0].Slug != "first" || rows[1].Slug != "second" || rows[0].ID != 1 || rows[1].ID != 2 {
		t.Fatalf("feed %+v (%v), want first (1) then second (2)", rows, err)
	}
}
