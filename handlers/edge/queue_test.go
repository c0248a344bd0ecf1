package edge_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/poll"
)

// A run records its wait for its model's turn (queueMs): a call that waited behind another for at
// least 150 ms says so in its run, as the API reads it; the call that went at once says 0; a call
// refused model_busy records the wait it gave up after.
func TestRunRecordsItsQueueWait(t *testing.T) {
	var gated atomic.Bool
	entered, let := make(chan struct{}, 8), make(chan struct{})
	e := newEnvWith(t, envOptions{models: admissionModels, upstreamSaw: func(r *http.Request) {
		if gated.Load() && strings.HasSuffix(r.URL.Path, "/chat/completions") {
			entered <- struct{}{}
			select {
			case <-let:
			case <-time.After(3 * time.Second):
			}
		}
	}})
	d, key := e.deploy("queue-ep", base("up-one"), cloudapi.AuthFixedAPIKey, "", 0)
	gated.Store(true)
	first := make(chan reply, 1)
	go func() { first <- e.do("POST", "queue-ep", "/v1/chat/completions", key, chatBody("first")) }()
	<-entered
	second := make(chan reply, 1)
	go func() { second <- e.do("POST", "queue-ep", "/v1/chat/completions", key, chatBody("second")) }()
	poll.Until(t, 5*time.Second, "the second call queued", func() bool {
		return strings.Contains(e.metricsText(), `svc_admission_queue_depth{lane="interactive",model="up-one"} 1`)
	})
	time.Sleep(150 * time.Millisecond) // the wait the run must record (below the 400 ms queue timeout)
	let <- struct{}{}
	<-entered
	let <- struct{}{}
	for _, ch := range []chan reply{first, second} {
		if r := <-ch; r.status != 200 {
			t.Fatalf("call: %d %s", r.status, r.body)
		}
	}
	// A third call while the model is busy gives up after the queue timeout.
	go func() { first <- e.do("POST", "queue-ep", "/v1/chat/completions", key, chatBody("held")) }()
	<-entered
	if r := e.do("POST", "queue-ep", "/v1/chat/completions", key, chatBody("refused")); r.status != 429 {
		t.Fatalf("refused: %d %s", r.status, r.body)
	}
	let <- struct{}{}
	<-first

	var got map[string]int64
	poll.Until(t, 5*time.Second, "four runs", func() bool {
		page, err := e.srv.Service.ListRuns(context.Background(), e.pr, d.ID, core.RunFilter{}, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		got = map[string]int64{}
		for _, r := range page.Items {
			run, err := e.srv.Service.GetRun(context.Background(), e.pr, d.ID, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			got[string(run.Request)] = run.Queue.Milliseconds()
		}
		return len(got) == 4
	})
	for req, ms := range got {
		switch {
		case strings.Contains(req, `"first"`) || strings.Contains(req, `"held"`):
			if ms != 0 {
				t.Errorf("a call that went at once records %d ms of queue: %s", ms, req)
			}
		case strings.Contains(req, `"second"`):
			if ms < 150 || ms > 3000 {
				t.Errorf("the call that waited records %d ms of queue, want at least 150", ms)
			}
		case strings.Contains(req, `"refused"`):
			if ms < 400 {
				t.Errorf("the model_busy call records %d ms of queue, want its 400 ms timeout", ms)
			}
		}
	}
}
