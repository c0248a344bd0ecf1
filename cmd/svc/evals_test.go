package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db/storetest"
)

// Two `svc server` replicas on one PostgreSQL database share an eval's work items; one is SIGKILLed
// mid-eval; the survivor takes its items again once their leases end, and the eval finishes with every
// source run replayed exactly once (its eval runs counted by evalOf).
func TestEvalSurvivesAKilledReplica(t *testing.T) {
	pg := storetest.Postgres(t)
	dbURL := pg.NewEmptyDatabase(t)
	home, dir := t.TempDir(), t.TempDir()
	models := filepath.Join(home, "models.yaml")
	// Slow enough that the eval is under way when a replica is killed: about 100 ms a replay.
	if err := os.WriteFile(models, []byte("models:\n  - name: sim-slow\n    runtime: simulator\n    public: true\n    simulator: {mode: echo, ttftMs: 60, itlMs: 10}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := svcEnv(home, "SVC_DATABASE_URL="+dbURL)
	var servers [2]*devProcess
	var apis [2]string
	for i := range servers {
		servers[i] = spawn(t, dir, env, "server", "--addr", "127.0.0.1:0", "--data", filepath.Join(home, fmt.Sprint("data", i)),
			"--models", models, "--eval-lease", "2s")
	}
	for i, s := range servers {
		apis[i] = s.waitReady(t, apiLine)
	}
	ctx := context.Background()
	sdk, err := cloudapi.New(apis[0], "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "shared-eval", AuthMode: "none",
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "sim-slow"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 80
	for i := range n {
		resp, err := http.Post(apis[i%2]+"/e/shared-eval/v1/chat/completions", "application/json",
			strings.NewReader(fmt.Sprintf(`{"messages":[{"role":"user","content":"question %d"}]}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: %d", i, resp.StatusCode)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		page, err := sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs stored after 20 s, want %d", len(page.Runs), n)
		}
		time.Sleep(20 * time.Millisecond)
	}

	e, err := sdk.CreateEval(ctx, d.ID, cloudapi.CreateEvalRequest{Candidate: d.Target, Runs: cloudapi.EvalRuns{Limit: n}, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	// Kill replica 0 once a quarter of the runs are replayed.
	for deadline := time.Now().Add(30 * time.Second); ; {
		got, err := sdk.GetEval(ctx, d.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Progress.Done >= n/4 {
			if got.Progress.Done == n {
				t.Fatalf("the eval finished before the kill: slow the simulator down")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the eval is %s, progress %+v", got.State, got.Progress)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := servers[0].cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	<-servers[0].done
	killedAt := time.Now()
	sdk.BaseURL = apis[1]
	var done *cloudapi.Eval
	for deadline := time.Now().Add(60 * time.Second); ; {
		got, err := sdk.GetEval(ctx, d.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Finished() {
			done = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s the eval is %s, progress %+v", got.State, got.Progress)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if done.State != cloudapi.EvalDone || done.Progress.Done != n || done.Progress.Failed != 0 || done.Summary == nil || done.Summary.Pairs != n {
		t.Fatalf("the eval ended %s, progress %+v, summary %+v, error %q", done.State, done.Progress, done.Summary, done.Error)
	}
	// Every source run replayed exactly once: the eval runs stored, counted by evalOf (the survivor's
	// recorder writes in batches, so the count is read until it holds every source run).
	var byOf map[string]int
	for deadline := time.Now().Add(20 * time.Second); ; {
		byOf = map[string]int{}
		cursor := ""
		for {
			page, err := sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Arm: cloudapi.ArmEval, Limit: 200, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				if r.EvalID == e.ID {
					byOf[r.EvalOf]++
				}
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(byOf) >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	twice := 0
	for _, c := range byOf {
		if c != 1 {
			twice++
		}
	}
	if len(byOf) != n || twice != 0 {
		t.Fatalf("%d source runs have eval runs (want %d), %d of them more than one", len(byOf), n, twice)
	}
	t.Logf("%d runs replayed once each; the eval finished %v after replica 0 was killed", n, done.FinishedAt.Sub(killedAt).Round(time.Millisecond))
}
