package inference

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/fleet"
)

// A model with a list of replicas routes each call through its picker (docs/LORA.md, "Fleets"): send
// asks it for a replica, tells it how the call ended, and retries once elsewhere when nothing of the
// answer was received.

// modelFleet is a model's picker and the loop that probes and scrapes its replicas.
type modelFleet struct {
	*fleet.Fleet
	stop context.CancelFunc
	done sync.WaitGroup
}

// newModelFleet starts the picker of a model with a list of replicas; nil for any other model (one
// upstreamUrl, or replicas: {dns}, still sent to the name).
func newModelFleet(m ModelConfig) *modelFleet {
	if m.Replicas == nil || len(m.Replicas.URLs) == 0 {
		return nil
	}
	mode, _ := fleet.ParseMode(m.Routing) // checked by Validate
	f, err := fleet.New(fleet.Config{Mode: mode, MaxLoras: m.MaxLoras}, m.Replicas.URLs)
	if err != nil {
		return nil // unreachable: Validate checked the list
	}
	ctx, stop := context.WithCancel(context.Background())
	mf := &modelFleet{Fleet: f, stop: stop}
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2}}
	mf.done.Go(func() { f.Run(ctx, client) })
	return mf
}

func (mf *modelFleet) close() {
	mf.stop()
	mf.done.Wait()
}

// noReplica is the 503 of a model none of whose replicas is healthy; it names the model, never an
// address.
func (o *openAI) noReplica() *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: "api_error", Code: CodeUpstreamUnavailable,
		Message: fmt.Sprintf("no replica serving %q is healthy; try again shortly", o.cfg.Name)}
}

// fleetBody tells the picker that a call ended when its answer is closed.
type fleetBody struct {
	io.ReadCloser
	f    *fleet.Fleet
	pick fleet.Pick
	done atomic.Bool
}

func (b *fleetBody) Close() error {
	err := b.ReadCloser.Close()
	if !b.done.Swap(true) {
		b.f.Done(b.pick, fleet.OK)
	}
	return err
}
