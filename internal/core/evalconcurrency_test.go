package core

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
)

// holdingReplayer holds every replay for hold, then answers and stores its run as the edge's recorder
// would, keeping the most replays it had under way at once.
type holdingReplayer struct {
	s    *Service
	hold time.Duration

	mu            sync.Mutex
	inFlight, max int
	calls         int
}

func (h *holdingReplayer) Replay(ctx context.Context, d *edgemodel.EdgeDeployment, body []byte, evalID, evalOf, runID string) (int, []byte) {
	h.mu.Lock()
	h.inFlight++
	h.calls++
	h.max = max(h.max, h.inFlight)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}()
	select {
	case <-time.After(h.hold):
	case <-ctx.Done():
		return 499, nil
	}
	answer := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"same"},"finish_reason":"stop"}]}`
	if err := h.s.q.RunCreate(ctx, h.s.db, dbsqlc.RunCreateParams{ID: runID, DeploymentID: d.ID, Model: "m", Status: "ok", LatencyMs: 1,
		CreatedAt: ms(h.s.now()), Request: string(body), Response: answer, Arm: edgemodel.ArmEval, EvalID: evalID, EvalOf: evalOf}); err != nil {
		return 500, nil
	}
	return http.StatusOK, []byte(answer)
}

// An eval's concurrency bounds its replays across every replica sharing the store: two workers (two
// replicas' worth) on an eval of concurrency 2 never have more than 2 replays under way between them,
// and do reach 2.
func TestEvalConcurrencyBoundsEveryReplica(t *testing.T) {
	s, now := newTestService(t)
	ctx := context.Background()
	p, pr := anonymousProject(t, s)
	d, err := s.CreateDeployment(ctx, p, pr, NewDeployment{Slug: "bounded", Target: edgemodel.Target{Kind: "base_model", Model: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	const n, concurrency = 12, 2
	for i := range n {
		if err := s.q.RunCreate(ctx, s.db, dbsqlc.RunCreateParams{ID: fmt.Sprintf("run_0000000000000000%04d", i), DeploymentID: d.ID, Model: "m", Status: "ok",
			LatencyMs: 1, CreatedAt: ms(now.Add(-time.Hour + time.Duration(i)*time.Second)),
			Request:  fmt.Sprintf(`{"messages":[{"role":"user","content":"q%d"}]}`, i),
			Response: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"same"},"finish_reason":"stop"}]}`}); err != nil {
			t.Fatal(err)
		}
	}
	e, err := s.CreateEval(ctx, pr, d.ID, NewEval{Candidate: edgemodel.Target{Kind: "base_model", Model: "m"}, Concurrency: concurrency}, "idn_a")
	if err != nil {
		t.Fatal(err)
	}
	// Each replay outlasts a worker's claim poll (100 ms), so that each worker finds the other's
	// replays under way whenever it claims.
	rp := &holdingReplayer{s: s, hold: 150 * time.Millisecond}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, id := range []string{"replica-a", "replica-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			(&EvalWorker{S: s, Replayer: rp, ID: id, Lease: time.Minute}).Run(wctx)
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() }) // before the store closes
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if e, err = s.GetEval(ctx, pr, d.ID, e.ID); err != nil {
			t.Fatal(err)
		}
		if e.State == EvalDone {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the eval is %s with progress %+v", e.State, e.Progress)
		}
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if e.Progress.Done != n || rp.calls != n {
		t.Fatalf("progress %+v after %d replays, want %d done, each replayed once", e.Progress, rp.calls, n)
	}
	if rp.max != concurrency {
		t.Fatalf("at most %d replays were under way at once across the two workers, want %d (the eval's concurrency)", rp.max, concurrency)
	}
	t.Logf("%d replays by two workers, at most %d at once (concurrency %d)", rp.calls, rp.max, concurrency)
}
