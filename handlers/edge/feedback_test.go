package edge_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/handlers/edge"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/redistest"
	"github.com/svcdev/svc/internal/runs"
)

// Every answer's id names its run (chat completions chatcmpl-, Messages msg_, Responses resp_, each
// with the run id's tail, streamed chunks included), and an app sends feedback with that id at once,
// before the run is written; the run keeps it, and usage counts it.
func TestFeedbackWithTheIDsClientsGet(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("fb", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	anthropic := map[string]string{"Authorization": "Bearer " + key, "Anthropic-Version": "2023-06-01"}

	var ids []string
	// chat, plain
	r := e.do("POST", "fb", "/v1/chat/completions", key, chatBody("hello"))
	ids = append(ids, idOf(t, r, "chatcmpl-"))
	// chat, streamed: every chunk carries the one id
	r = e.do("POST", "fb", "/v1/chat/completions", key, chatBody("hello", "stream", true))
	var streamID string
	for _, data := range sseData(r.body) {
		if data == "[DONE]" {
			continue
		}
		var ch struct{ ID string }
		json.Unmarshal([]byte(data), &ch)
		if streamID == "" {
			streamID = ch.ID
		}
		if ch.ID != streamID {
			t.Fatalf("chunk id %q, the stream's first was %q", ch.ID, streamID)
		}
	}
	if !strings.HasPrefix(streamID, "chatcmpl-") {
		t.Fatalf("stream id %q", streamID)
	}
	ids = append(ids, streamID)
	// Messages, plain and streamed
	r = e.doHeaders("POST", "fb", "/v1/messages", map[string]any{"model": "up", "max_tokens": 16, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, anthropic)
	ids = append(ids, idOf(t, r, "msg_"))
	r = e.doHeaders("POST", "fb", "/v1/messages", map[string]any{"model": "up", "max_tokens": 16, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, anthropic)
	var start struct{ Message struct{ ID string } }
	for _, data := range sseData(r.body) {
		if strings.Contains(data, `"message_start"`) {
			json.Unmarshal([]byte(data), &start)
		}
	}
	if !strings.HasPrefix(start.Message.ID, "msg_") {
		t.Fatalf("message_start id %q: %s", start.Message.ID, r.body)
	}
	ids = append(ids, start.Message.ID)
	// Responses (translated)
	r = e.do("POST", "fb", "/v1/responses", key, map[string]any{"model": "up", "input": "hi"})
	ids = append(ids, idOf(t, r, "resp_"))
	// Messages passed through to an upstream that serves them: svc's id in place of the upstream's.
	native, nativeKey := e.deploy("fb-native", base("up-native"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	nativeHeaders := map[string]string{"Authorization": "Bearer " + nativeKey, "Anthropic-Version": "2023-06-01"}
	r = e.doHeaders("POST", "fb-native", "/v1/messages", map[string]any{"model": "up-native", "max_tokens": 16, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nativeHeaders)
	nativeIDs := []string{idOf(t, r, "msg_")}
	r = e.doHeaders("POST", "fb-native", "/v1/messages", map[string]any{"model": "up-native", "max_tokens": 16, "stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}}}, nativeHeaders)
	start.Message.ID = ""
	for _, data := range sseData(r.body) {
		if strings.Contains(data, `"message_start"`) {
			json.Unmarshal([]byte(data), &start)
		}
	}
	if _, ok := runs.IDOf(start.Message.ID); !ok || !strings.HasPrefix(start.Message.ID, "msg_") {
		t.Fatalf("passed-through message_start id %q: %s", start.Message.ID, r.body)
	}
	nativeIDs = append(nativeIDs, start.Message.ID)
	for i, id := range nativeIDs {
		if r := e.do("POST", "fb-native", "/v1/feedback", nativeKey, map[string]any{"id": id, "score": 1 - i}); r.status != 200 {
			t.Fatalf("feedback on passed-through %s: %d %s", id, r.status, r.body)
		}
	}
	for _, run := range e.runs(native.ID, 2) {
		var scored sql.NullInt64
		e.db.QueryRow(`SELECT feedback_score FROM runs WHERE id = ?`, run["id"]).Scan(&scored)
		if !scored.Valid {
			t.Errorf("passed-through run %s has no feedback", run["id"])
		}
	}

	// Feedback at once, with each id: the runs are not written yet, and are waited for.
	for i, id := range ids {
		score := []int{1, -1, 0, 1, -1, 0, 1}[i]
		r := e.do("POST", "fb", "/v1/feedback", key, map[string]any{"id": id, "score": score, "comment": "said " + id})
		if r.status != 200 {
			t.Fatalf("feedback on %s: %d %s", id, r.status, r.body)
		}
	}
	stored := e.runs(d.ID, len(ids))
	byID := map[string]bool{}
	for _, run := range stored {
		byID[run["id"].(string)] = true
	}
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	for i, id := range ids {
		runID, _ := runs.IDOf(id)
		if !byID[runID] {
			t.Fatalf("%s names run %s, which is not stored (%v)", id, runID, byID)
		}
		run, err := api.GetRun(ctx, d.ID, runID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Feedback == nil || run.Feedback.Score != []int{1, -1, 0, 1, -1, 0, 1}[i] || run.Feedback.Comment != "said "+id {
			t.Errorf("run %s keeps feedback %+v", runID, run.Feedback)
		}
	}
	// A score changed moves the usage count: 2 up, 2 down, 1 neutral, then the first up becomes down.
	if r := e.do("POST", "fb", "/v1/feedback", key, map[string]any{"id": ids[0], "score": -1}); r.status != 200 {
		t.Fatalf("second feedback: %d %s", r.status, r.body)
	}
	usage, err := api.GetDeploymentUsage(ctx, d.ID, cloudapi.UsageWindow(time.Now(), 2, cloudapi.GranularityHour))
	if err != nil {
		t.Fatal(err)
	}
	var got cloudapi.FeedbackCounts
	for _, b := range usage.Buckets {
		got.Up, got.Down, got.Neutral = got.Up+b.Feedback.Up, got.Down+b.Feedback.Down, got.Neutral+b.Feedback.Neutral
	}
	if got != (cloudapi.FeedbackCounts{Up: 1, Down: 3, Neutral: 1}) {
		t.Errorf("usage feedback %+v, want 1 up, 3 down, 1 neutral", got)
	}
	// Cleared feedback leaves the counts: 1 up, 2 down, 1 neutral.
	runID, _ := runs.IDOf(ids[1])
	if run, err := api.ClearRunFeedback(ctx, d.ID, runID); err != nil || run.Feedback != nil {
		t.Fatalf("clear: %+v %v", run, err)
	}
	usage, err = api.GetDeploymentUsage(ctx, d.ID, cloudapi.UsageWindow(time.Now(), 2, cloudapi.GranularityHour))
	if err != nil {
		t.Fatal(err)
	}
	got = cloudapi.FeedbackCounts{}
	for _, b := range usage.Buckets {
		got.Up, got.Down, got.Neutral = got.Up+b.Feedback.Up, got.Down+b.Feedback.Down, got.Neutral+b.Feedback.Neutral
	}
	if got != (cloudapi.FeedbackCounts{Up: 1, Down: 2, Neutral: 1}) {
		t.Errorf("usage feedback after a clear %+v, want 1 up, 2 down, 1 neutral", got)
	}
}

// Feedback on an id of no run this endpoint may score (unknown, malformed, another endpoint's, a run
// of an endpoint that keeps none) is one and the same 404; bad values are 400s naming the field; a
// wrong key is 401.
func TestFeedbackRefusals(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("fb-mine", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	_, otherKey := e.deploy("fb-other", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	_, noneKey := e.deploy("fb-none", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionNone, 0)
	mine := idOf(t, e.do("POST", "fb-mine", "/v1/chat/completions", key, chatBody("hello")), "chatcmpl-")
	other := idOf(t, e.do("POST", "fb-other", "/v1/chat/completions", otherKey, chatBody("hello")), "chatcmpl-")
	unkept := idOf(t, e.do("POST", "fb-none", "/v1/chat/completions", noneKey, chatBody("hello")), "chatcmpl-")
	e.runs(d.ID, 1)

	var first []byte
	for _, c := range []struct{ slug, key, id string }{
		{"fb-mine", key, "chatcmpl-0000000000000nothere"},
		{"fb-mine", key, "not an id"},
		{"fb-mine", key, other},
		{"fb-other", otherKey, mine},
		{"fb-none", noneKey, unkept},
	} {
		r := e.do("POST", c.slug, "/v1/feedback", c.key, map[string]any{"id": c.id, "score": 1})
		wantError(t, r, 404, "not_found")
		if strings.Contains(string(r.body), c.id) {
			t.Errorf("the 404 repeats the id: %s", r.body)
		}
		if first == nil {
			first = r.body
		} else if string(r.body) != string(first) {
			t.Errorf("404 for %s differs: %s, the first was %s", c.id, r.body, first)
		}
	}
	for _, c := range []struct {
		body  any
		param string
	}{
		{map[string]any{"id": mine, "score": 2}, "score"},
		{map[string]any{"id": mine}, "score"},
		{map[string]any{"score": 1}, "id"},
		{map[string]any{"id": mine, "score": 1, "comment": strings.Repeat("x", 2001)}, "comment"},
		{map[string]any{"id": mine, "score": 1, "rating": 5}, "rating"},
		{`{"id": "x", "score": "1"}`, "score"},
		{`{"id": "` + mine + `", "score": 1, "comment": "half a pair \ud800 here"}`, "comment"}, // docs/API.md: valid UTF-8
		{`{"id": "` + mine + `", "score": 1, "comment": "low half \udc00"}`, "comment"},
	} {
		r := e.do("POST", "fb-mine", "/v1/feedback", key, c.body)
		if got := wantError(t, r, 400, "invalid_request"); got["param"] != c.param {
			t.Errorf("%v: param %v, want %s (%s)", c.body, got["param"], c.param, r.body)
		}
	}
	wantError(t, e.do("POST", "fb-mine", "/v1/feedback", otherKey, map[string]any{"id": mine, "score": 1}), 401, "invalid_api_key")
	// Nothing above changed the run.
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	runID, _ := runs.IDOf(mine)
	run, err := api.GetRun(context.Background(), d.ID, runID)
	if err != nil || run.Feedback != nil {
		t.Fatalf("run %s: feedback %+v, %v", runID, run.Feedback, err)
	}
}

// idOf reads an answer's id and checks its prefix.
func idOf(t *testing.T, r reply, prefix string) string {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	id, _ := r.json(t)["id"].(string)
	if !strings.HasPrefix(id, prefix) {
		t.Fatalf("id %q, want %s…: %s", id, prefix, r.body)
	}
	if _, ok := runs.IDOf(id); !ok {
		t.Fatalf("id %q names no run", id)
	}
	return id
}

// A passed-through Responses answer carries the upstream's response id (previous_response_id goes back
// to that upstream): its run keeps that id, streamed or not, and feedback names the run by it, under
// the same rule of ownership as every other id; sent at once, before the run is written, it is kept.
func TestFeedbackOnPassedThroughResponses(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("fb-pass", base("up-responses"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	_, otherKey := e.deploy("fb-pass-other", base("up-responses"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)

	plain := idOf(t, e.do("POST", "fb-pass", "/v1/responses", key, map[string]any{"model": "up-responses", "input": "hi"}), "resp_")
	r := e.do("POST", "fb-pass", "/v1/responses", key, map[string]any{"model": "up-responses", "input": "hi", "stream": true})
	var created struct{ Response struct{ ID string } }
	for _, data := range sseData(r.body) {
		if strings.Contains(data, `"response.created"`) {
			json.Unmarshal([]byte(data), &created)
		}
	}
	streamed := created.Response.ID
	if !strings.HasPrefix(plain, "resp_mock") || !strings.HasPrefix(streamed, "resp_mock") || plain == streamed {
		t.Fatalf("ids %q and %q: the mock upstream's should have passed through", plain, streamed)
	}
	// At once, as an app would: the runs may not be written yet.
	for i, id := range []string{plain, streamed} {
		if r := e.do("POST", "fb-pass", "/v1/feedback", key, map[string]any{"id": id, "score": 1 - 2*i, "comment": "on " + id}); r.status != 200 {
			t.Fatalf("feedback on passed-through %s: %d %s", id, r.status, r.body)
		}
	}
	// Another endpoint's key cannot score them: the one 404.
	wantError(t, e.do("POST", "fb-pass-other", "/v1/feedback", otherKey, map[string]any{"id": plain, "score": 1}), 404, "not_found")

	stored := e.runs(d.ID, 2)
	if len(stored) != 2 {
		t.Fatalf("%d runs stored, want 2", len(stored))
	}
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	for _, run := range stored {
		got, err := api.GetRun(ctx, d.ID, run["id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.Index([]string{plain, streamed}, got.UpstreamResponseID)
		if i < 0 {
			t.Fatalf("run %s keeps upstream response id %q, want %s or %s", got.ID, got.UpstreamResponseID, plain, streamed)
		}
		if got.Feedback == nil || got.Feedback.Score != 1-2*i || got.Feedback.Comment != "on "+got.UpstreamResponseID {
			t.Errorf("run %s (upstream %s) keeps feedback %+v", got.ID, got.UpstreamResponseID, got.Feedback)
		}
	}
	// A second feedback changes the score.
	if r := e.do("POST", "fb-pass", "/v1/feedback", key, map[string]any{"id": plain, "score": 0}); r.status != 200 {
		t.Fatalf("second feedback on %s: %d %s", plain, r.status, r.body)
	}
}

// Feedback is a request of its key: it takes from the deployment's and the key's requests a minute as
// an inference call does, answers with the x-ratelimit-* headers, and beyond a limit is the same 429
// (OpenAI's envelope, Retry-After), stored nowhere; the calls after it are refused alike. In this
// process's buckets, and counted in a real Redis (svc server --redis) alike.
func TestFeedbackIsRateLimited(t *testing.T) {
	t.Run("memory", func(t *testing.T) { feedbackIsRateLimited(t, newEnv(t)) })
	t.Run("redis", func(t *testing.T) { feedbackIsRateLimited(t, newEnvWith(t, envOptions{redis: redistest.Start(t).URL})) })
}

func feedbackIsRateLimited(t *testing.T, e *env) {
	d, key := e.deploy("fb-rpm", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	e.limitKey(d.ID, core.RateLimitsChange{RequestsPerMinute: limit(2)}) // the first key's, while it is the only one
	other, err := e.srv.Service.IssueKey(context.Background(), e.pr, d.ID, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Service.UpdateDeployment(context.Background(), e.pr, d.ID,
		core.DeploymentChange{Limits: core.RateLimitsChange{RequestsPerMinute: limit(4)}}); err != nil {
		t.Fatal(err)
	}
	id := idOf(t, e.do("POST", "fb-rpm", "/v1/chat/completions", key, chatBody("hello")), "chatcmpl-")

	// The key's second request is a feedback: accepted, and it spends the key's minute.
	r := e.do("POST", "fb-rpm", "/v1/feedback", key, map[string]any{"id": id, "score": 1, "comment": "kept"})
	if r.status != 200 {
		t.Fatalf("feedback within the limit: %d %s", r.status, r.body)
	}
	if r.header.Get("X-Ratelimit-Limit-Requests") != "2" || r.header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Errorf("feedback's rate-limit headers: %v", r.header)
	}
	// Its third is refused by the key's limit, feedback or call alike, before the body is read.
	r = e.do("POST", "fb-rpm", "/v1/feedback", key, map[string]any{"id": id, "score": -1, "comment": "refused"})
	m := wantError(t, r, 429, "rate_limit_exceeded")
	if m["type"] != "rate_limit_error" || !strings.Contains(m["message"].(string), "key's rate limit") ||
		r.header.Get("Retry-After") == "" || r.header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Errorf("feedback 429: %s %v", r.body, r.header)
	}
	wantError(t, e.do("POST", "fb-rpm", "/v1/chat/completions", key, chatBody("again")), 429, "rate_limit_exceeded")
	// The other key has a minute of its own, within the deployment's 4: two feedbacks spend the rest.
	for i := 0; i < 2; i++ {
		if r := e.do("POST", "fb-rpm", "/v1/feedback", other.Plaintext, map[string]any{"id": id, "score": 0}); r.status != 200 {
			t.Fatalf("other key's feedback %d: %d %s", i+1, r.status, r.body)
		}
	}
	r = e.do("POST", "fb-rpm", "/v1/feedback", other.Plaintext, map[string]any{"id": id, "score": -1})
	if m := wantError(t, r, 429, "rate_limit_exceeded"); !strings.Contains(m["message"].(string), "deployment's rate limit") {
		t.Errorf("deployment's 429: %s", r.body)
	}
	// Refused feedback changed nothing: the run keeps the last accepted score.
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	runID, _ := runs.IDOf(id)
	run, err := api.GetRun(context.Background(), d.ID, runID)
	if err != nil || run.Feedback == nil || run.Feedback.Score != 0 {
		t.Fatalf("run %s: feedback %+v, %v", runID, run.Feedback, err)
	}
	// Counted by scope, as every refusal.
	resp, err := http.Get(e.srv.BaseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`svc_edge_rate_limited_total{deployment="fb-rpm",scope="key"} 2`, `svc_edge_rate_limited_total{deployment="fb-rpm",scope="deployment"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// A comment is at most 2,000 characters, whatever their size as UTF-8 or as JSON escapes; a longer
// one is a 400 naming comment, and a body past 64 KiB is refused before it is read whole.
func TestFeedbackCommentCap(t *testing.T) {
	e := newEnv(t)
	_, key := e.deploy("fb-cap", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	id := idOf(t, e.do("POST", "fb-cap", "/v1/chat/completions", key, chatBody("hello")), "chatcmpl-")
	// The longest comments: 2,000 four-byte characters, raw and escaped (12 bytes each).
	for _, c := range []string{
		`{"id": "` + id + `", "score": 1, "comment": "` + strings.Repeat("😀", edgemodel.MaxFeedbackComment) + `"}`,
		`{"id": "` + id + `", "score": 1, "comment": "` + strings.Repeat(`\ud83d\ude00`, edgemodel.MaxFeedbackComment) + `"}`,
	} {
		if r := e.do("POST", "fb-cap", "/v1/feedback", key, c); r.status != 200 {
			t.Fatalf("a comment of %d characters (%d bytes): %d %s", edgemodel.MaxFeedbackComment, len(c), r.status, r.body)
		}
	}
	r := e.do("POST", "fb-cap", "/v1/feedback", key, map[string]any{"id": id, "score": 1, "comment": strings.Repeat("é", edgemodel.MaxFeedbackComment+1)})
	if m := wantError(t, r, 400, "invalid_request"); m["param"] != "comment" || !strings.Contains(m["message"].(string), "at most 2000 characters") {
		t.Errorf("2,001 characters: %s", r.body)
	}
	r = e.do("POST", "fb-cap", "/v1/feedback", key, map[string]any{"id": id, "score": 1, "comment": strings.Repeat("x", edge.MaxFeedbackBody)})
	if m := wantError(t, r, 413, "body_too_large"); m["param"] != "comment" || m["type"] != "invalid_request_error" {
		t.Errorf("a 64 KiB comment: %s", r.body)
	}
}
