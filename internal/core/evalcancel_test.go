package core

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// blockingReplayer answers every replay with the same chat completion once release is closed, and
// stores its run as the edge's recorder would, counting the replays it was asked for.
type blockingReplayer struct {
	s       *Service
	calls   atomic.Int64
	release chan struct{}
}

func (b *blockingReplayer) Replay(ctx context.Context, d *edgemodel.EdgeDeployment, body []byte, evalID, evalOf, runID string) (int, []byte) {
	b.calls.Add(1)
	select {
	case <-b.release:
	case <-ctx.Done():
		return 499, nil
	}
	answer := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"same"},"finish_reason":"stop"}]}`
	if err := b.s.q.RunCreate(ctx, b.s.db, dbsqlc.RunCreateParams{ID: runID, DeploymentID: d.ID, Model: "m", Status: "ok", LatencyMs: 1,
		CreatedAt: ms(b.s.now()), Request: string(body), Response: answer, Arm: edgemodel.ArmEval, EvalID: evalID, EvalOf: evalOf}); err != nil {
		return 500, nil
	}
	return http.StatusOK, []byte(answer)
}

// Canceling a running eval stops its worker claiming: the replays under way (its concurrency) finish
// and are recorded, no other run is replayed, and the eval stays canceled without a summary.
func TestCancelStopsAnEvalsReplays(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "cancel", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for i := range n {
		if err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: fmt.Sprintf("run_0000000000000000%04d", i), DeploymentID: d.ID, Model: "m", Status: "ok",
			LatencyMs: 1, CreatedAt: ms(now.Add(-time.Hour + time.Duration(i)*time.Second)),
			Request:  fmt.Sprintf(`{"messages":[{"role":"user","content":"q%d"}]}`, i),
			Response: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"same"},"finish_reason":"stop"}]}`}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := s.CreateEval(ctx, pr, d.ID, NewEval{Candidate: edgemodel.Target{Kind: "base_model", Model: "m"}, Concurrency: 2}, "idn_a")
	if err != nil {
		t.Fatal(err)
	}
	if e.Progress.Total != n || e.State != EvalQueued {
		t.Fatalf("created: %+v", e)
	}
	rp := &blockingReplayer{s: s, release: make(chan struct{})}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		(&EvalWorker{S: s, Replayer: rp, ID: "w1", Lease: time.Minute}).Run(wctx)
		close(done)
	}()
	t.Cleanup(func() { stop(); <-done }) // before the store closes
	for deadline := time.Now().Add(10 * time.Second); rp.calls.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("the worker asked for %d replays in 10 s, want 2", rp.calls.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if e, err = s.CancelEval(ctx, pr, d.ID, e.ID); err != nil || e.State != EvalCanceled {
		t.Fatalf("cancel: %v %+v", err, e)
	}
	close(rp.release)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if e, err = s.GetEval(ctx, pr, d.ID, e.ID); err != nil {
			t.Fatal(err)
		}
		if e.Progress.Done == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replays under way did not finish: %+v", e.Progress)
		}
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	<-done
	if got := rp.calls.Load(); got != 2 || e.State != EvalCanceled || e.Summary != nil || e.Progress.Done != 2 {
		t.Fatalf("after cancel: %d replays, state %s, progress %+v, summary %+v", got, e.State, e.Progress, e.Summary)
	}
}
