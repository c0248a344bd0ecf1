package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db/storetest"
)

// pgIngestRow is the "PostgreSQL ingest" row: a second `svc server` on a throw-away PostgreSQL server
// (started like the tests' one, db/storetest: fsync off, on this machine), a recording deployment
// under conns connections of non-streamed chat completions for d, then the time until the recorder has
// written every run (its queue and spool empty). It prints the requests answered, the runs stored
// (counted through the management API) and runs stored per second from the first request to the last
// run written: what one replica stores, its load generator and PostgreSQL sharing the machine. With an
// outage (-pg-outage), PostgreSQL is stopped for that long 5 s into the load, which goes on 5 s after it
// is back: every answered call must still be a stored run (docs/OPERATIONS.md, "Bounds").
func pgIngestRow(ctx context.Context, svcBin, tmp, models string, logFile io.Writer, conns int, d, outage time.Duration) error {
	pg, err := storetest.StartServer()
	if err != nil {
		fmt.Printf("PostgreSQL ingest: skipped (%v)\n", err)
		return nil
	}
	defer pg.Stop()
	port, err := freePort()
	if err != nil {
		return err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	svc, err := startWith(svcBin, []string{"server", "--addr", fmt.Sprintf("127.0.0.1:%d", port), "--data", filepath.Join(tmp, "pgdata"),
		"--models", models, "--base-url", base}, []string{"SVC_DATABASE_URL=" + pg.URL("postgres")}, base, logFile)
	if err != nil {
		return err
	}
	defer svc.stop()
	cl, err := cloudapi.New(base, "").AnonymousProject(ctx)
	if err != nil {
		return err
	}
	dep, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "bench-pg",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "bench-llama"}, AuthMode: cloudapi.AuthFixedAPIKey,
		RunRetentionMode: "days", RunRetentionDays: 7})
	if err != nil {
		return err
	}
	key, err := cl.IssueDeploymentKey(ctx, dep.ID, "bench")
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns}}
	host := fmt.Sprintf("bench-pg.localhost:%d", port)
	var answered, failed atomic.Int64
	var wg sync.WaitGroup
	if outage > 0 {
		d = 5*time.Second + outage + 5*time.Second
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
			}
			if err := pg.Halt(); err != nil {
				fmt.Printf("PostgreSQL ingest: the outage did not start: %v\n", err)
				return
			}
			time.Sleep(outage)
			if err := pg.Resume(); err != nil {
				fmt.Printf("PostgreSQL ingest: PostgreSQL did not start again: %v\n", err)
			}
		}()
	}
	start := time.Now()
	end := start.Add(d)
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
				req.Host = host
				req.Header.Set("Authorization", "Bearer "+key.Plaintext)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					answered.Add(1)
				} else {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	loadTime := time.Since(start)
	var m map[string]float64
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if m, err = scrape(ctx, base); err != nil {
			return err
		}
		if m["svc_recorder_queue_depth"] == 0 && m["svc_recorder_spooled_runs"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("PostgreSQL ingest: the recorder did not drain in 2 minutes")
		}
	}
	drained := time.Since(start) // the queue empty; its last partial batch written within recorderCatchUp
	time.Sleep(recorderCatchUp)
	stored := 0
	for cursor := ""; ; {
		page, err := cl.ListRuns(ctx, dep.ID, cloudapi.ListRunsOptions{Limit: 200, Cursor: cursor})
		if err != nil {
			return err
		}
		stored += len(page.Runs)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	total := drained + recorderCatchUp
	loadavg, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("\nPostgreSQL ingest (svc server --database postgres://…, PostgreSQL %s on this machine, fsync off; %d connections for %v", pg.Version, conns, d)
	if outage > 0 {
		fmt.Printf(", PostgreSQL stopped for %v after 5 s", outage)
	}
	fmt.Println(")")
	fmt.Printf("  requests answered %d (%.0f/s), not answered %d; runs stored %d, %.0f runs/s from the first request to the last run written\n",
		answered.Load(), float64(answered.Load())/loadTime.Seconds(), failed.Load(), stored, float64(stored)/total.Seconds())
	fmt.Printf("  recorder: %.0f runs dropped, %.0f failed; load average %s\n", m["svc_recorder_runs_dropped_total"], m["svc_recorder_runs_failed_total"], strings.TrimSpace(string(loadavg)))
	return nil
}
