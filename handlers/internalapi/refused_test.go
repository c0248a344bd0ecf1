package internalapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
)

// refusingIngester takes every run but one id, which it refuses as a store would (the recorder's
// refusals land on another branch): it stands in for the store, not for the handler.
type refusingIngester struct{ refuse string }

func (f refusingIngester) Ingest(_ context.Context, b *runs.Batch, _ time.Time) (runs.IngestResult, error) {
	var res runs.IngestResult
	for run, err := range b.Runs {
		if err != nil {
			return runs.IngestResult{}, err
		}
		if run.ID == f.refuse {
			res.Refused = append(res.Refused, runs.Refused{ID: run.ID, Reason: "the store cannot take this run"})
			continue
		}
		res.Inserted++
	}
	return res, nil
}

// POST runs names the runs the store refused, by id and reason, and never their content.
func TestRunBatchAnswerNamesRefusedRuns(t *testing.T) {
	ctx := context.Background()
	sqldb, err := db.OpenFile(ctx, filepath.Join(t.TempDir(), "svc.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	svc := core.New(core.Options{DB: sqldb, Runs: refusingIngester{refuse: "run_bad"}})
	_, token, err := svc.CreateEdgeToken(ctx, "edge-1")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(Options{Service: svc, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	defer srv.Close()

	now := time.Now().UTC()
	run := func(id string) edgewire.RunV1 {
		return edgewire.RunV1{ID: id, DeploymentID: "dep_1", Model: "m", Status: "ok", CreatedAt: now,
			Request: `{"secret":"do-not-echo"}`, Response: `{}`}
	}
	data, _ := json.Marshal(edgewire.RunBatchV1{BatchID: "batch_r", Runs: []edgewire.RunV1{run("run_ok"), run("run_bad")}})
	req := httptest.NewRequest("POST", srv.URL+edgewire.RunsPath, strings.NewReader(string(data)))
	req.RequestURI = ""
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var res edgewire.RunBatchResult
	if resp.StatusCode != 200 || json.Unmarshal(body, &res) != nil {
		t.Fatalf("POST runs: %d %s", resp.StatusCode, body)
	}
	if res.Inserted != 1 || len(res.Refused) != 1 || res.Refused[0].ID != "run_bad" || res.Refused[0].Reason != "the store cannot take this run" {
		t.Fatalf("answer %s, want run_bad refused with its reason", body)
	}
	if strings.Contains(string(body), "do-not-echo") {
		t.Fatalf("the answer carries a run's content: %s", body)
	}
}
