package server

import (
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/runs"
)

// While runs wait in the recorder's spool, /readyz stays 200 and says the recorder is behind, and
// svc_recorder_spooled_runs counts them; once the database takes writes again both say so.
func TestReadinessSaysTheRecorderIsBehind(t *testing.T) {
	srv, _ := started(t, Config{})
	// Every write of runs fails while the usage and batch tables are away, as it does while PostgreSQL
	// is stopped.
	for _, stmt := range []string{`ALTER TABLE usage_hourly RENAME TO usage_hourly_away`, `ALTER TABLE edge_batches RENAME TO edge_batches_away`} {
		if _, err := srv.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	srv.recorder.Record(runs.Run{DeploymentID: "gone", Model: "m", Request: []byte("{}"), Response: []byte("{}")})
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
