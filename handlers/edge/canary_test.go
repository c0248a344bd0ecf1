package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
)

// setCanary gives a deployment a canary on a base model.
func (e *env) setCanary(id, model string, percent int, mode string) {
	e.t.Helper()
	c := core.Canary{Target: edgemodel.Target{Kind: edgemodel.TargetBaseModel, Model: model}, Percent: percent, Mode: mode}
	if _, err := e.srv.Service.UpdateDeployment(context.Background(), e.pr, id, core.DeploymentChange{Canary: &core.CanaryChange{Canary: &c}}); err != nil {
		e.t.Fatal(err)
	}
}

// armRun is a run's canary columns.
type armRun struct {
	id, model, status, arm, armTarget, shadowOf, response string
	createdAt, ttftMs                                     int64
}

// armRuns waits for n runs of a deployment and returns them with their arms, oldest first.
func (e *env) armRuns(deploymentID string, n int) []armRun {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := e.db.Query(`SELECT id, model, status, arm, arm_target, shadow_of, response, created_at, ttft_ms
			FROM runs WHERE deployment_id = ? ORDER BY created_at, id`, deploymentID)
		if err != nil {
			e.t.Fatal(err)
		}
		var out []armRun
		for rows.Next() {
			var r armRun
			if err := rows.Scan(&r.id, &r.model, &r.status, &r.arm, &r.armTarget, &r.shadowOf, &r.response, &r.createdAt, &r.ttftMs); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, r)
		}
		rows.Close()
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// answeredBy is the model an answer names: the arm that answered it.
func answeredBy(t *testing.T, r reply) string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	m, _ := r.json(t)["model"].(string)
	return m
}

// A split canary answers about its percent of the sessions, each session on one arm for every turn
// whatever keys it (the user, a session header, the conversation's opening, a Responses chain), and
// each run records the arm and its target.
func TestSplitCanaryKeepsEachSessionOnItsArm(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("split", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(d.ID, "sim-think", 30, edgemodel.CanarySplit)

	const sessions = 200
	onCanary := 0
	for i := range sessions {
		var arms []string
		switch i % 4 {
		case 0: // the user field, turns growing
			msgs := []any{map[string]any{"role": "user", "content": fmt.Sprintf("hello %d", i)}}
			for turn := range 3 {
				arms = append(arms, answeredBy(t, e.do("POST", "split", "/v1/chat/completions", key, map[string]any{"user": fmt.Sprintf("user-%d", i), "messages": msgs})))
				msgs = append(msgs, map[string]any{"role": "assistant", "content": "ok"}, map[string]any{"role": "user", "content": fmt.Sprint("turn ", turn)})
			}
		case 1: // Codex's session header, a different body each turn
			for turn := range 3 {
				arms = append(arms, answeredBy(t, e.doHeaders("POST", "split", "/v1/chat/completions", chatBody(fmt.Sprint("turn ", turn)),
					map[string]string{"Authorization": bearer(key), "session_id": fmt.Sprintf("codex-%d", i)})))
			}
		case 2: // nothing but the conversation's opening
			msgs := []any{map[string]any{"role": "system", "content": "be brief"}, map[string]any{"role": "user", "content": fmt.Sprintf("question %d", i)}}
			for range 3 {
				arms = append(arms, answeredBy(t, e.do("POST", "split", "/v1/chat/completions", key, map[string]any{"messages": msgs})))
				msgs = append(msgs, map[string]any{"role": "assistant", "content": "ok"}, map[string]any{"role": "user", "content": "go on"})
			}
		case 3: // a Responses previous_response_id chain, each turn only its new input
			previous := ""
			for turn := range 3 {
				body := map[string]any{"input": fmt.Sprintf("chain %d turn %d", i, turn)}
				if previous != "" {
					body["previous_response_id"] = previous
				}
				r := e.do("POST", "split", "/v1/responses", key, body)
				arms = append(arms, answeredBy(t, r))
				previous, _ = r.json(t)["id"].(string)
			}
		}
		for _, a := range arms[1:] {
			if a != arms[0] {
				t.Fatalf("session %d (kind %d) changed arm across its turns: %q", i, i%4, arms)
			}
		}
		if arms[0] == "sim-think" {
			onCanary++
		} else if arms[0] != "sim-echo" {
			t.Fatalf("session %d answered by %q", i, arms[0])
		}
	}
	if share := float64(onCanary) / sessions; share < 0.22 || share > 0.38 {
		t.Fatalf("%d of %d sessions (%.0f%%) on a 30%% canary", onCanary, sessions, share*100)
	}
	t.Logf("%d of %d sessions on the 30%% canary", onCanary, sessions)
	runs := e.armRuns(d.ID, sessions*3)
	if len(runs) != sessions*3 {
		t.Fatalf("%d runs, want %d", len(runs), sessions*3)
	}
	for _, r := range runs {
		want := map[string]string{"sim-echo": edgemodel.ArmPrimary, "sim-think": edgemodel.ArmCanary}[r.model]
		if r.arm != want || r.armTarget != r.model || r.shadowOf != "" || r.ttftMs < 0 {
			t.Fatalf("run %s answered by %s records arm %q target %q shadowOf %q", r.id, r.model, r.arm, r.armTarget, r.shadowOf)
		}
	}
	// Usage by arm counts the same calls.
	arms, err := e.srv.Service.UsageByArm(context.Background(), e.pr, d.ID, core.UsageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(arms) != 2 || arms[0].Totals.Requests != int64(3*(sessions-onCanary)) || arms[1].Totals.Requests != int64(3*onCanary) ||
		arms[1].Target != "sim-think" || arms[1].Totals.TTFT.P50Ms == nil {
		t.Fatalf("usage by arm: %+v", arms)
	}
	// Feedback on a run counts in its arm's usage.
	var canaryRun string
	for _, r := range runs {
		if r.arm == edgemodel.ArmCanary {
			canaryRun = r.id
			break
		}
	}
	if err := e.srv.Service.EdgeFeedback(context.Background(), d.ID, canaryRun, -1, ""); err != nil {
		t.Fatal(err)
	}
	if arms, err = e.srv.Service.UsageByArm(context.Background(), e.pr, d.ID, core.UsageRequest{}); err != nil ||
		arms[1].Totals.Feedback != (core.FeedbackCounts{Down: 1}) || arms[0].Totals.Feedback != (core.FeedbackCounts{}) {
		t.Fatalf("feedback by arm after a thumbs-down on a canary run: %+v %v", arms, err)
	}
}

// Promoting while calls flow fails none of them, and every call begun after the promote returned is
// answered by, and recorded under, the new target.
func TestPromoteWhileTrafficFlows(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("promote", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(d.ID, "sim-think", 50, edgemodel.CanarySplit)
	client := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)

	var stop atomic.Bool
	var failed atomic.Int64
	var calls atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				body := chatBody(fmt.Sprintf("worker %d call %d", w, i), "stream", i%2 == 0)
				r := e.do("POST", "promote", "/v1/chat/completions", key, body)
				calls.Add(1)
				if r.status != http.StatusOK || (i%2 == 0 && !strings.Contains(string(r.body), "[DONE]")) {
					failed.Add(1)
					t.Errorf("call failed during the promote: %d %s", r.status, r.body)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // on purpose: the promote lands while traffic flows
	got, err := client.PromoteCanary(context.Background(), d.ID)
	if err != nil {
		t.Fatal(err)
	}
	promoted := time.Now().UnixMilli()
	if got.Canary != nil || got.Target.Kind != cloudapi.TargetBaseModel || got.Target.Model != "sim-think" {
		t.Fatalf("after promote: %+v", got)
	}
	time.Sleep(300 * time.Millisecond) // on purpose: traffic goes on past the promote
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed", failed.Load(), calls.Load())
	}
	runs := e.armRuns(d.ID, int(calls.Load()))
	after := 0
	for _, r := range runs {
		if r.createdAt > promoted {
			after++
			if r.model != "sim-think" || r.arm != "" {
				t.Fatalf("a run begun after the promote was answered by %q (arm %q)", r.model, r.arm)
			}
		}
	}
	if after == 0 || len(runs) != int(calls.Load()) {
		t.Fatalf("%d runs after the promote, %d runs of %d calls", after, len(runs), calls.Load())
	}
}

// A shadow canary never answers: the caller gets the primary's answer, and the canary's answer to a
// copy is recorded as a run paired with the primary's.
func TestShadowCanaryRecordsPairedRuns(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("shadow", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(d.ID, "sim-think", 10, edgemodel.CanaryShadow)
	const n = 20
	for i := range n {
		path, body := "/v1/chat/completions", any(chatBody(fmt.Sprintf("shadowed %d", i), "stream", i%2 == 1))
		if i%4 == 0 {
			path, body = "/v1/responses", map[string]any{"input": fmt.Sprintf("shadowed %d", i)}
		}
		r := e.do("POST", "shadow", path, key, body)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "sim-echo") || strings.Contains(string(r.body), "sim-think") {
			t.Fatalf("call %d: the caller did not get the primary's answer: %d %s", i, r.status, r.body)
		}
	}
	runs := e.armRuns(d.ID, 2*n)
	if len(runs) != 2*n {
		t.Fatalf("%d runs, want %d (each call and its shadow)", len(runs), 2*n)
	}
	primary := map[string]armRun{}
	for _, r := range runs {
		if r.arm == edgemodel.ArmPrimary {
			primary[r.id] = r
		}
	}
	paired := 0
	for _, r := range runs {
		if r.arm != edgemodel.ArmCanary {
			continue
		}
		p, ok := primary[r.shadowOf]
		if !ok || r.model != "sim-think" || r.armTarget != "sim-think" || r.status != "ok" || p.model != "sim-echo" || p.shadowOf != "" {
			t.Fatalf("shadow run %+v is not paired with a primary run (%+v)", r, p)
		}
		paired++
	}
	if paired != n || len(primary) != n {
		t.Fatalf("%d shadow runs paired with %d primary runs, want %d", paired, len(primary), n)
	}
}

// Shadow copies are never the caller's usage: a key that made n calls shows n requests (the API's key
// totals and its usage by key alike), the deployment's buckets count the callers' n calls, and the
// copies are shown apart (copies), with their tokens; feedback on a copy moves no count of the key's.
func TestShadowCopiesAreNotTheKeysUsage(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("shadow-usage", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(d.ID, "sim-think", 10, edgemodel.CanaryShadow)
	const n = 9
	for i := range n {
		if r := e.do("POST", "shadow-usage", "/v1/chat/completions", key, chatBody(fmt.Sprintf("mine %d", i))); r.status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	stored := e.armRuns(d.ID, 2*n) // usage is written in the runs' batches
	if len(stored) != 2*n {
		t.Fatalf("%d runs, want %d (each call and its copy)", len(stored), 2*n)
	}
	var copyRun string
	for _, r := range stored {
		if r.shadowOf != "" {
			copyRun = r.id
		}
	}
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	if _, err := api.SetRunFeedback(ctx, d.ID, copyRun, cloudapi.SetRunFeedbackRequest{Score: 1}); err != nil {
		t.Fatal(err)
	}
	window := cloudapi.UsageWindow(time.Now(), 2, cloudapi.GranularityHour)
	usage, err := api.GetDeploymentUsage(ctx, d.ID, window)
	if err != nil {
		t.Fatal(err)
	}
	var callers, copies, copyTokens int64
	for _, b := range usage.Buckets {
		callers += b.Requests
		if b.Copies != nil {
			copies += b.Copies.Requests
			copyTokens += b.Copies.PromptTokens + b.Copies.CompletionTokens
		}
	}
	if callers != n || copies != n || copyTokens == 0 {
		t.Errorf("deployment usage: %d callers' requests and %d copies (%d tokens), want %d and %d (with tokens)", callers, copies, copyTokens, n, n)
	}
	if len(usage.Keys) != 1 || usage.Keys[0].Requests != n {
		t.Errorf("key totals %+v, want one key with %d requests", usage.Keys, n)
	}
	keys, err := api.ListDeploymentKeys(ctx, d.ID)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %+v, %v", keys, err)
	}
	window.KeyID = keys[0].ID
	mine, err := api.GetDeploymentUsage(ctx, d.ID, window)
	if err != nil {
		t.Fatal(err)
	}
	var keyRequests, keyFeedback int64
	for _, b := range mine.Buckets {
		keyRequests += b.Requests
		keyFeedback += b.Feedback.Up + b.Feedback.Down + b.Feedback.Neutral
		if b.Copies != nil {
			t.Errorf("a key's usage shows copies: %+v", b.Copies)
		}
	}
	if keyRequests != n || keyFeedback != 0 {
		t.Errorf("the key's usage: %d requests and %d scores, want %d and 0 (the copy's score is not the key's)", keyRequests, keyFeedback, n)
	}
}

// The shadow queue is bounded: copies beyond it are dropped and counted, never waited for, and the
// callers' answers do not wait for the canary.
func TestShadowQueueDropsWhenFull(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("flood", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(d.ID, "sim-slow", 50, edgemodel.CanaryShadow) // about 4 s an answer: the 64 workers stay busy
	const n = 400
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if r := e.do("POST", "flood", "/v1/chat/completions", key, chatBody(fmt.Sprint("flood ", i))); r.status != http.StatusOK {
					t.Errorf("call %d: %d %s", i, r.status, r.body)
				}
			}
		}()
	}
	wg.Wait()
	// A call's copy is handed over once its handler returns, which may be just after its caller read the
	// answer: the counts are read until every call's copy is counted, 5 s at most.
	var queued, dropped int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := http.Get(e.srv.BaseURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			fmt.Sscanf(l, "svc_edge_shadow_copies_total %d", &queued)
			fmt.Sscanf(l, "svc_edge_shadow_dropped_total %d", &dropped)
		}
		if queued+dropped >= n || time.Now().After(deadline) {
			break
		}
	}
	if dropped == 0 || queued+dropped != n || queued > 256+2*64 {
		t.Fatalf("%d copies queued and %d dropped of %d calls (the queue holds 256, 64 in service)", queued, dropped, n)
	}
}

// A canary whose target cannot serve a surface the primary serves changes nothing for the callers of
// that surface: under a split canary every Messages call (and count_tokens, and an extra route its
// model's entry does not list) is answered by the primary and recorded as the primary's arm, whichever
// arm its session hashes to, while chat calls still split; under a shadow canary such a call is copied
// to nobody, and chat calls still are. Before, 24 of the 50 sessions' Messages calls on this 50% canary
// were 404s, and the shadow recorded a failed copy of each.
func TestCanaryLeavesASurfaceItsTargetLacksToThePrimary(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("lacks", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0) // Messages, embeddings
	e.setCanary(d.ID, "sim-lorem", 50, edgemodel.CanarySplit)                      // neither

	const sessions = 50
	calls, chatOnCanary := 0, 0
	for i := range sessions {
		user := fmt.Sprintf("agent-%d", i)
		for turn := range 2 {
			body := messagesBody(fmt.Sprintf("turn %d", turn), "metadata", map[string]any{"user_id": user}, "stream", turn == 1)
			r := e.do("POST", "lacks", "/v1/messages", key, body)
			if r.status != http.StatusOK || !strings.Contains(string(r.body), "sim-echo") {
				t.Fatalf("session %d turn %d on /v1/messages: %d %s", i, turn, r.status, r.body)
			}
			calls++
		}
		r := e.do("POST", "lacks", "/v1/messages/count_tokens", key, messagesBody("count me", "metadata", map[string]any{"user_id": user}))
		if r.status != http.StatusOK {
			t.Fatalf("session %d count_tokens: %d %s", i, r.status, r.body)
		}
		calls++
		if r := e.do("POST", "lacks", "/v1/embeddings", key, map[string]any{"input": "embed me", "user": user}); r.status != http.StatusOK {
			t.Fatalf("session %d embeddings: %d %s", i, r.status, r.body)
		}
		calls++
		// The same user's chat calls are the canary's when its session hashes there.
		if answeredBy(t, e.do("POST", "lacks", "/v1/chat/completions", key, chatBody("hi", "user", user))) == "sim-lorem" {
			chatOnCanary++
		}
		calls++
	}
	if chatOnCanary == 0 || chatOnCanary == sessions {
		t.Fatalf("%d of %d sessions' chat calls on the 50%% canary: the split no longer splits chat", chatOnCanary, sessions)
	}
	runs := e.armRuns(d.ID, calls)
	if len(runs) != calls {
		t.Fatalf("%d runs, want %d", len(runs), calls)
	}
	canaryRuns := 0
	for _, r := range runs {
		switch {
		case r.model == "sim-lorem" && r.arm == edgemodel.ArmCanary && r.armTarget == "sim-lorem":
			canaryRuns++
		case r.model == "sim-echo" && r.arm == edgemodel.ArmPrimary && r.armTarget == "sim-echo" && r.status == "ok":
		default:
			t.Fatalf("run %+v: want the primary's ok run, or the canary's chat run", r)
		}
	}
	if canaryRuns != chatOnCanary {
		t.Fatalf("%d canary runs, want the %d chat calls it answered", canaryRuns, chatOnCanary)
	}
	arms, err := e.srv.Service.UsageByArm(context.Background(), e.pr, d.ID, core.UsageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(arms) != 2 || arms[0].Totals.Requests != int64(calls-chatOnCanary) || arms[1].Totals.Requests != int64(chatOnCanary) || arms[1].Totals.Errors != 0 {
		t.Fatalf("usage by arm: %+v", arms)
	}

	// Shadow: the Messages calls are copied to nobody, the chat calls are.
	s, skey := e.deploy("lacks-shadow", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(s.ID, "sim-lorem", 50, edgemodel.CanaryShadow)
	const n = 10
	for i := range n {
		if r := e.do("POST", "lacks-shadow", "/v1/messages", skey, messagesBody(fmt.Sprint("shadowed ", i), "stream", i%2 == 1)); r.status != http.StatusOK {
			t.Fatalf("shadowed Messages call %d: %d %s", i, r.status, r.body)
		}
	}
	if r := e.do("POST", "lacks-shadow", "/v1/chat/completions", skey, chatBody("shadowed chat")); r.status != http.StatusOK {
		t.Fatalf("shadowed chat call: %d %s", r.status, r.body)
	}
	e.armRuns(s.ID, n+2)
	time.Sleep(200 * time.Millisecond) // on purpose: nothing more should arrive; a copy of a Messages call, were one made, would be recorded by now
	runs = e.armRuns(s.ID, n+2)
	copies := 0
	for _, r := range runs {
		if r.arm == edgemodel.ArmCanary {
			copies++
			if r.model != "sim-lorem" || r.status != "ok" || r.shadowOf == "" {
				t.Fatalf("shadow run %+v: want the chat call's ok copy", r)
			}
		} else if r.arm != edgemodel.ArmPrimary || r.model != "sim-echo" || r.status != "ok" {
			t.Fatalf("run %+v: want the primary's", r)
		}
	}
	if len(runs) != n+2 || copies != 1 {
		t.Fatalf("%d runs with %d shadow copies, want %d with 1 (the chat call's)", len(runs), copies, n+2)
	}
}
