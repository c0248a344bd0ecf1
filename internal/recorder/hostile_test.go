package recorder

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/runs"
)

// hostileBodies are what a client may send that PostgreSQL's TEXT refuses or that looks like the
// store's own encoding: each must be stored and read back byte for byte, on both engines.
var hostileBodies = []struct{ name, body string }{
	{"nul", "{\"messages\":\"a\x00b\"}"},
	{"only nul", "\x00"},
	{"invalid utf-8", "{\"x\":\"\xff\xfe\xc3\x28\"}"},
	{"lone surrogate", "{\"x\":\"\xed\xa0\x80\"}"}, // U+D800 encoded as UTF-8, which UTF-8 forbids
	{"escaped lone surrogate", `{"x":"\ud800"}`},
	{"binary", string([]byte{0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0x80, 0x00})},
	{"encoding prefix", "\uFFFEsvc-base64:AAAA"},
	{"plain", `{"model":"m","messages":[{"role":"user","content":"héllo 😀"}]}`},
	{"empty", ""},
}

// getRun reads a run through the store's own query, as the API's run detail does.
func getRun(t *testing.T, sqldb *sql.DB, id string) dbsqlc.Run {
	t.Helper()
	r, err := db.For(sqldb).RunGet(context.Background(), sqldb, dbsqlc.RunGetParams{ID: id, DeploymentID: "d1"})
	if err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	return r
}

func TestHostileBodiesAreStoredAsSent(t *testing.T) {
	sqldb := fixture(t)
	rec := New(sqldb, Options{})
	defer rec.Close()
	at := time.UnixMilli(1_700_000_000_000)

	// Through an edge's batch (Ingest) and through the recorder's own batches (Record), together with
	// an ordinary run that must not wait behind them.
	var shipped []runs.Shipped
	i := 0
	for _, c := range hostileBodies {
		name, body := c.name, c.body
		i++
		shipped = append(shipped, runs.Shipped{ID: fmt.Sprintf("ing%02d", i), Run: runs.Run{DeploymentID: "d1", KeyID: "k1",
			Model: "m\x00\xff" + name, Status: "ok", CreatedAt: at, Request: []byte(body), Response: []byte(body)}})
		rec.Record(runs.Run{ID: fmt.Sprintf("rec%02d", i), DeploymentID: "d1", KeyID: "k1", Model: "m", Status: "ok",
			CreatedAt: at, Request: []byte(body), Response: []byte(body)})
	}
	res, err := rec.Ingest(context.Background(), &runs.Batch{ID: "b1", Runs: runs.RunsOf(shipped)}, at)
	if err != nil {
		t.Fatal(err)
	}
	if res.Inserted != len(hostileBodies) || len(res.Refused) != 0 {
		t.Fatalf("ingest: %+v, want all %d inserted", res, len(hostileBodies))
	}
	rec.Flush()
	if rec.Failed() != 0 {
		t.Fatalf("%d runs failed", rec.Failed())
	}
	i = 0
	for _, c := range hostileBodies {
		name, body := c.name, c.body
		i++
		for _, id := range []string{fmt.Sprintf("ing%02d", i), fmt.Sprintf("rec%02d", i)} {
			got := getRun(t, sqldb, id)
			if got.Request != body || got.Response != body {
				t.Errorf("%s (%s): stored %q / %q, want %q", name, id, got.Request, got.Response, body)
			}
		}
	}
}

// refuseModel makes the store refuse runs of one model, as it refuses a value it cannot hold: a
// CHECK constraint on PostgreSQL, a trigger on SQLite (both answer with a constraint error).
func refuseModel(t *testing.T, sqldb *sql.DB, model string) {
	t.Helper()
	stmt := `ALTER TABLE runs ADD CONSTRAINT no_poison CHECK (model <> '` + model + `')`
	if db.EngineOf(sqldb) != db.Postgres {
		stmt = `CREATE TRIGGER no_poison BEFORE INSERT ON runs WHEN NEW.model = '` + model + `'
			BEGIN SELECT RAISE(ABORT, 'poison'); END`
	}
	if _, err := sqldb.Exec(stmt); err != nil {
		t.Fatal(err)
	}
}

func TestRefusedRunIsSetAsideAndTheRestStored(t *testing.T) {
	sqldb := fixture(t)
	refuseModel(t, sqldb, "poison")
	rec := New(sqldb, Options{})
	defer rec.Close()
	at := time.UnixMilli(1_700_000_000_000)

	var shipped []runs.Shipped
	for i := range 50 {
		model := "m"
		if i == 7 || i == 31 {
			model = "poison"
		}
		shipped = append(shipped, runs.Shipped{ID: fmt.Sprintf("r%02d", i), Run: runs.Run{DeploymentID: "d1", KeyID: "k1",
			Model: model, Status: "ok", CreatedAt: at, PromptTokens: 1, Request: []byte("{}"), Response: []byte("{}")}})
	}
	res, err := rec.Ingest(context.Background(), &runs.Batch{ID: "b1", Runs: runs.RunsOf(shipped)}, at)
	if err != nil {
		t.Fatal(err)
	}
	if res.Inserted != 48 || len(res.Refused) != 2 || res.Refused[0].ID != "r07" || res.Refused[1].ID != "r31" {
		t.Fatalf("result %+v, want 48 inserted and r07, r31 refused", res)
	}
	for _, f := range res.Refused {
		if f.Reason == "" || strings.Contains(f.Reason, "{}") {
			t.Errorf("reason %q", f.Reason)
		}
	}
	if n := len(runsOf(t, sqldb, "d1")); n != 48 {
		t.Fatalf("%d runs stored, want 48", n)
	}
	// The same batch again is a replay; the same runs in a new batch are duplicates and refused again,
	// never an error that would make the edge resend for ever.
	res, err = rec.Ingest(context.Background(), &runs.Batch{ID: "b2", Runs: runs.RunsOf(shipped)}, at)
	if err != nil || res.Duplicates != 48 || len(res.Refused) != 2 {
		t.Fatalf("again: %+v, %v", res, err)
	}

	// The recorder's own batches: the refused run is counted and the others stored.
	before := rec.Failed()
	for i := range 20 {
		model := "m"
		if i == 3 {
			model = "poison"
		}
		rec.Record(runs.Run{ID: fmt.Sprintf("own%02d", i), DeploymentID: "d2", Model: model, Status: "ok", CreatedAt: at})
	}
	rec.Flush()
	if n := len(runsOf(t, sqldb, "d2")); n != 19 {
		t.Fatalf("%d own runs stored, want 19", n)
	}
	if got := rec.Failed() - before; got != 1 {
		t.Fatalf("failed %d, want 1", got)
	}
}

// FuzzHostileRun sends one run with any body through an edge's batch, between two ordinary runs, on
// the pass's engine (run it with SVC_TEST_ENGINES unset to reach PostgreSQL): all three are stored,
// and the body reads back as sent.
func FuzzHostileRun(f *testing.F) {
	for _, c := range hostileBodies {
		f.Add([]byte(c.body))
	}
	sqldb := fixture(f)
	rec := New(sqldb, Options{})
	f.Cleanup(func() { rec.Close() })
	f.Fuzz(func(t *testing.T, body []byte) {
		at := time.UnixMilli(1_700_000_000_000)
		base := runs.NewID(time.Now()) // unique across fuzz workers
		id := func(k int) string { return fmt.Sprintf("%s-%d", base, k) }
		batch := []runs.Shipped{
			{ID: id(0), Run: runs.Run{DeploymentID: "d1", Model: "m", Status: "ok", CreatedAt: at, Request: []byte("{}")}},
			{ID: id(1), Run: runs.Run{DeploymentID: "d1", Model: string(body), Status: "ok", CreatedAt: at, Request: body, Response: body}},
			{ID: id(2), Run: runs.Run{DeploymentID: "d1", Model: "m", Status: "ok", CreatedAt: at, Request: []byte("{}")}},
		}
		res, err := rec.Ingest(context.Background(), &runs.Batch{ID: "fb" + id(0), Runs: runs.RunsOf(batch)}, at)
		if err != nil {
			t.Fatal(err)
		}
		if res.Inserted != 3 {
			t.Fatalf("%+v", res)
		}
		got := getRun(t, sqldb, id(1))
		if got.Request != string(body) || got.Response != string(body) {
			t.Fatalf("stored %q, sent %q", got.Request, body)
		}
	})
}
