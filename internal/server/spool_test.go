package server

import (
	"context"
	"database/sql"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/svcdev/svc/cloudapi"

	"github.com/svcdev/svc/internal/metrics"

	"github.com/svcdev/svc/internal/runs"
)

// While runs wait in the recorder's spool, /readyz stays 200 and says the recorder is behind, and
// svc_recorder_spooled_runs counts them; once the database takes writes again both say so.
func TestReadinessSaysTheRecorderIsBehind(t *testing.T) {
	srv, c := started(t, Config{})
	d, err := c.CreateDeployment(context.Background(), cloudapi.CreateDeploymentRequest{Slug: "behind", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	// Every write of runs fails while the usage and batch tables are away, as it does while PostgreSQL
	// is stopped.
	for _, stmt := range []string{`ALTER TABLE usage_hourly RENAME TO usage_hourly_away`, `ALTER TABLE edge_batches RENAME TO edge_batches_away`} {
		if _, err := srv.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	srv.recorder.Record(runs.Run{DeploymentID: d.ID, Model: "m", Request: []byte("{}"), Response: []byte("{}")})
	srv.recorder.Flush()

	resp, body := fetch(t, "GET", srv.BaseURL+"/readyz", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"recorder":"behind"`) || !strings.Contains(body, `"spooledRuns":1`) {
		t.Fatalf("readyz while runs are spooled: %d %s", resp.StatusCode, body)
	}
	_, text := fetch(t, "GET", srv.BaseURL+"/metrics", "", nil)
	if v := metricLine(text, "svc_recorder_spooled_runs "); v != "1" {
		t.Fatalf("svc_recorder_spooled_runs = %q, want 1", v)
	}

	for _, stmt := range []string{`ALTER TABLE usage_hourly_away RENAME TO usage_hourly`, `ALTER TABLE edge_batches_away RENAME TO edge_batches`} {
		if _, err := srv.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body = fetch(t, "GET", srv.BaseURL+"/readyz", "", nil)
		if resp.StatusCode == 200 && strings.Contains(body, `"recorder":"ok"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz once the database is back: %d %s", resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, text = fetch(t, "GET", srv.BaseURL+"/metrics", "", nil)
	if v := metricLine(text, "svc_recorder_spooled_runs "); v != "0" {
		t.Fatalf("svc_recorder_spooled_runs = %q once drained, want 0", v)
	}
}

// recorderAt is a recorder's state as /readyz reads it.
type recorderAt struct {
	spooled  int64
	spools   bool
	degraded string
}

func (r recorderAt) Spooled() int64   { return r.spooled }
func (r recorderAt) Spools() bool     { return r.spools }
func (r recorderAt) Degraded() string { return r.degraded }

// While the database does not answer at all, /readyz stays 200 ("degraded") when the recorder keeps
// runs in its spool meanwhile, and is 503 when it has no spool and would lose them. A recorder losing
// runs (its spool's disk full, its buffers full) is "degraded" with the database up, saying why.
func TestReadinessWithTheDatabaseAway(t *testing.T) {
	away, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	away.Close() // every query now fails, as against a stopped PostgreSQL
	here, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "y.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer here.Close()
	for _, c := range []struct {
		rec    recorderAt
		status int
		body   string
	}{
		{recorderAt{spooled: 7, spools: true}, 200, `{"checks":{"database":"not answering","recorder":"behind"},"spooledRuns":7,"status":"degraded"}`},
		{recorderAt{spools: false}, 503, `{"checks":{"database":"not answering","recorder":"ok"},"status":"unavailable"}`},
		{recorderAt{spools: true, degraded: "spool write failing"}, 200, `{"checks":{"database":"ok","recorder":"spool write failing"},"status":"degraded"}`},
		{recorderAt{spools: true, spooled: 3, degraded: "dropping runs"}, 200, `{"checks":{"database":"ok","recorder":"dropping runs"},"spooledRuns":3,"status":"degraded"}`},
	} {
		e := echo.New()
		sqldb := away
		if c.rec.degraded != "" {
			sqldb = here
		}
		health(e, sqldb, c.rec, metrics.New(), false)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil))
		if w.Code != c.status || strings.TrimSpace(w.Body.String()) != c.body {
			t.Errorf("%+v: %d %s; want %d %s", c.rec, w.Code, w.Body, c.status, c.body)
		}
	}
}
