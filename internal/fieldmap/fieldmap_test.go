package fieldmap

import (
	"database/sql"
	"reflect"
	"strings"
	"testing"
	"time"
)

type bytes []byte

// wire, row and api are one record in three forms, as svc has them: the edge's, the store's and the
// SDK's.
type wire struct {
	ID        string
	KeyID     string
	Status    string
	Tokens    int
	Latency   time.Duration
	TTFT      time.Duration
	CreatedAt time.Time
	ExpiresAt time.Time
	Body      bytes
	Extra     bool
}

type row struct {
	ID        string
	KeyID     sql.NullString
	Status    string
	Tokens    int64
	LatencyMs int64
	TtftMs    int64
	CreatedAt int64
	ExpiresAt sql.NullInt64
	Body      string
	Score     sql.NullInt64
}

type summary struct {
	ID        string
	KeyID     *string
	Tokens    int32
	LatencyMs int64
	TTFTMs    int64
	CreatedAt time.Time
	ExpiresAt *time.Time
}

type api struct {
	summary
	Status string
	Body   string
	Note   string
}

func TestEveryFormConvertsBothWays(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123).UTC()
	in := wire{ID: "r1", KeyID: "k1", Status: "ok", Tokens: 7, Latency: 42 * time.Millisecond, TTFT: 9 * time.Millisecond,
		CreatedAt: at, ExpiresAt: at.Add(time.Hour), Body: bytes(`{"a":1}`), Extra: true}

	var r row
	New[row, wire]().Copy(&r, &in)
	want := row{ID: "r1", KeyID: sql.NullString{String: "k1", Valid: true}, Status: "ok", Tokens: 7, LatencyMs: 42, TtftMs: 9,
		CreatedAt: at.UnixMilli(), ExpiresAt: sql.NullInt64{Int64: at.Add(time.Hour).UnixMilli(), Valid: true}, Body: `{"a":1}`}
	if r != want {
		t.Fatalf("row\n got %+v\nwant %+v", r, want)
	}

	var back wire
	New[wire, row]().Copy(&back, &r)
	in.Extra = false // no column holds it
	if !reflect.DeepEqual(back, in) {
		t.Fatalf("back from the row\n got %+v\nwant %+v", back, in)
	}

	var a api
	New[api, wire]().Copy(&a, &in)
	if a.ID != "r1" || a.KeyID == nil || *a.KeyID != "k1" || a.Tokens != 7 || a.LatencyMs != 42 || a.TTFTMs != 9 ||
		!a.CreatedAt.Equal(at) || a.ExpiresAt == nil || !a.ExpiresAt.Equal(at.Add(time.Hour)) || a.Status != "ok" || a.Body != `{"a":1}` {
		t.Fatalf("api form: %+v", a)
	}
	var w wire
	New[wire, api]().Copy(&w, &a)
	if !reflect.DeepEqual(w, in) {
		t.Fatalf("back from the api form\n got %+v\nwant %+v", w, in)
	}
}

// The empty forms: "" is NULL and nil, the zero time is NULL and nil, no bytes is "" and back nil.
func TestEmptyValuesAreNull(t *testing.T) {
	var r row
	r.KeyID = sql.NullString{String: "stale", Valid: true}
	New[row, wire]().Copy(&r, &wire{})
	if r.KeyID.Valid || r.ExpiresAt.Valid || r.Body != "" || r.CreatedAt != (time.Time{}).UnixMilli() {
		t.Fatalf("row of an empty record: %+v", r)
	}
	a := api{Note: "kept"}
	s := "stale"
	a.KeyID, a.ExpiresAt = &s, &time.Time{}
	New[api, wire]().Copy(&a, &wire{})
	if a.KeyID != nil || a.ExpiresAt != nil || a.Note != "kept" {
		t.Fatalf("api form of an empty record: %+v (a field no source feeds must be left alone)", a)
	}
	w := wire{Body: bytes("x"), KeyID: "x"}
	New[wire, row]().Copy(&w, &row{})
	if w.Body != nil || w.KeyID != "" || !w.ExpiresAt.IsZero() {
		t.Fatalf("record of an empty row: %+v", w)
	}
}

func TestUnfedAndSkipped(t *testing.T) {
	if got := New[wire, row]().Unfed(); !reflect.DeepEqual(got, []string{"Extra"}) {
		t.Errorf("unfed fields of wire from row: %v", got)
	}
	if got := New[api, wire]().Unfed(); !reflect.DeepEqual(got, []string{"Note"}) {
		t.Errorf("unfed fields of api from wire: %v", got)
	}
	if got := New[row, wire]().Unread(); !reflect.DeepEqual(got, []string{"Extra"}) {
		t.Errorf("unread fields of wire into row: %v", got)
	}
	if got := New[wire, row]().Unread(); !reflect.DeepEqual(got, []string{"Score"}) {
		t.Errorf("unread fields of row into wire: %v", got)
	}
	m := New[api, wire]("Note", "status")
	if got := m.Unfed(); len(got) != 0 {
		t.Errorf("unfed with Note skipped: %v", got)
	}
	a := api{Status: "mine"}
	m.Copy(&a, &wire{Status: "theirs"})
	if a.Status != "mine" {
		t.Errorf("a skipped field was copied: %q", a.Status)
	}
}

// Two fields of one name that no rule converts are a mistake found when the map is built.
func TestUnconvertibleFieldsPanic(t *testing.T) {
	type a struct{ Score float64 }
	type b struct{ Score sql.NullInt64 }
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "Score") {
			t.Fatalf("panic %q, want one naming Score", msg)
		}
	}()
	New[a, b]()
}

// Copying between the store's and the edge's forms, which the recorder does for every run, allocates
// nothing beyond the strings of the body.
func TestCopyDoesNotAllocate(t *testing.T) {
	m := New[row, wire]("Body")
	in := wire{ID: "r1", KeyID: "k1", Status: "ok", Tokens: 7, Latency: time.Second, CreatedAt: time.Now(), ExpiresAt: time.Now()}
	var r row
	if n := testing.AllocsPerRun(100, func() { m.Copy(&r, &in) }); n != 0 {
		t.Errorf("%v allocations per copy, want 0", n)
	}
}

func BenchmarkCopy(b *testing.B) {
	m := New[row, wire]()
	in := wire{ID: "r1", KeyID: "k1", Status: "ok", Tokens: 7, Latency: time.Second, CreatedAt: time.Now(), ExpiresAt: time.Now(), Body: bytes("{}")}
	var r row
	for b.Loop() {
		m.Copy(&r, &in)
	}
}
