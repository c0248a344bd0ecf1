package internalapi_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/runs"
	"github.com/svcdev/svc/internal/server"
)

// syncBuffer is a log sink read while the server writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	t     testing.TB
	srv   *server.Server
	sdk   *cloudapi.Client
	anon  string // the anonymous management token
	token string // a live edge token
	logs  *syncBuffer
}

func newEnv(t testing.TB) *env {
	t.Helper()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), Logger: log,
		EdgeFeedHeartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	sdk, err := cloudapi.New(srv.BaseURL, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, edgeToken, err := srv.Service.CreateEdgeToken(ctx, "edge-1")
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, srv: srv, sdk: sdk, anon: sdk.Token, token: edgeToken, logs: logs}
}

func (e *env) do(method, path, token string, body []byte, header map[string]string) (*http.Response, string) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// envelope checks that body is the API's error envelope with this status and code.
func envelope(t *testing.T, what string, status int, body string, wantStatus int, wantCode string) {
	t.Helper()
	var env struct {
		Error cloudapi.ErrorBody `json:"error"`
	}
	if status != wantStatus || json.Unmarshal([]byte(body), &env) != nil || env.Error.Code != wantCode || env.Error.Status != wantStatus {
		t.Fatalf("%s: %d %s; want %d %s in the API envelope", what, status, body, wantStatus, wantCode)
	}
}

func TestInternalAPIAnswersOnlyEdgeTokens(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "inside", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.sdk.IssueDeploymentKey(ctx, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	_, revoked, err := e.srv.Service.CreateEdgeToken(ctx, "old-edge")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Service.RevokeEdgeToken(ctx, "old-edge"); err != nil {
		t.Fatal(err)
	}
	snapshotPath := edgewire.DeploymentsPath + "inside"
	for _, tc := range []struct {
		what, token string
		status      int
		code        string
	}{
		{"no token", "", 401, "unauthorized"},
		{"unknown edge token", "svc-edge-unknown", 401, "unauthorized"},
		{"revoked edge token", revoked, 401, "unauthorized"},
		{"anonymous management token", e.anon, 403, "forbidden"},
		{"endpoint key", key.Plaintext, 403, "forbidden"},
	} {
		for _, path := range []string{snapshotPath, edgewire.ChangesPath, edgewire.StoredRunsPath + d.ID + "/run_x", "/internal/v1/edge/anything"} {
			resp, body := e.do("GET", path, tc.token, nil, nil)
			envelope(t, tc.what+" on "+path, resp.StatusCode, body, tc.status, tc.code)
		}
		resp, body := e.do("POST", edgewire.RunsPath, tc.token, []byte(`{}`), nil)
		envelope(t, tc.what+" posting runs", resp.StatusCode, body, tc.status, tc.code)
	}

	// An edge token reaches nothing outside the internal API: not the management API, not an endpoint.
	resp, body := e.do("GET", "/v1/me", e.token, nil, nil)
	envelope(t, "edge token on the management API", resp.StatusCode, body, 401, "unauthorized")
	resp, body = e.do("GET", "/e/inside/v1/models", e.token, nil, nil)
	if resp.StatusCode != 401 || !strings.Contains(body, "invalid_api_key") {
		t.Fatalf("edge token as an endpoint key: %d %s", resp.StatusCode, body)
	}

	// With its token: the snapshot carries the key's hash, never its plaintext.
	resp, body = e.do("GET", snapshotPath, e.token, nil, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("snapshot: %d %s", resp.StatusCode, body)
	}
	var snap edgewire.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(key.Plaintext))
	if snap.Deployment.ID != d.ID || snap.Deployment.AuthMode != "fixed_api_key" || len(snap.Deployment.Keys) != 1 ||
		snap.Deployment.Keys[0].Hash != hex.EncodeToString(sum[:]) || snap.Deployment.ExpiresAt == nil || snap.ChangeID < 2 {
		t.Fatalf("snapshot %s", body)
	}
	if strings.Contains(body, key.Plaintext) {
		t.Fatal("the snapshot carries the key's plaintext")
	}
	resp, body = e.do("GET", edgewire.DeploymentsPath+"nobody-here", e.token, nil, nil)
	envelope(t, "snapshot of an unknown slug", resp.StatusCode, body, 404, "not_found")
	if resp.Header.Get(edgewire.ChangeIDHeader) == "" {
		t.Fatal("a 404 snapshot has no change id")
	}
	resp, body = e.do("POST", snapshotPath, e.token, nil, nil)
	envelope(t, "POST on a snapshot", resp.StatusCode, body, 405, "method_not_allowed")
	resp, body = e.do("GET", "/internal/v1/edge/nothing", e.token, nil, nil)
	envelope(t, "unknown internal route", resp.StatusCode, body, 404, "not_found")

	// No secret reached the log.
	for name, secret := range map[string]string{"edge token": e.token, "revoked edge token": revoked, "key": key.Plaintext, "anonymous token": e.anon} {
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("the control plane's log holds the %s", name)
		}
	}
}

func TestShippedBatchesApplyOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "shipped", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.sdk.IssueDeploymentKey(ctx, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	run := func(id string) edgewire.RunV1 {
		return edgewire.RunV1{ID: id, DeploymentID: d.ID, KeyID: key.Key.ID, Model: "m", Status: "ok", LatencyMs: 12, PromptTokens: 3,
			CompletionTokens: 4, CreatedAt: now, Request: `{"messages":[]}`, Response: `{"id":"x"}`, RequestID: "req_" + id}
	}
	// A batch goes gzipped in lines, as edges send it, or plain in the first form, as an edge of the
	// previous release does: the same batch in either form is applied once.
	post := func(b edgewire.RunBatchV1, gz bool) edgewire.RunBatchResult {
		t.Helper()
		data, _ := json.Marshal(b)
		header := map[string]string{"Content-Type": "application/json"}
		if gz {
			h, _ := json.Marshal(edgewire.BatchHeader{Batch: b.BatchID, Touches: b.Touches})
			data = append(h, '\n')
			for _, r := range b.Runs {
				run := r.Run()
				data, _ = runs.AppendLine(data, &run)
			}
			header["Content-Type"] = edgewire.ContentTypeRuns
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			zw.Write(data)
			zw.Close()
			data, header["Content-Encoding"] = buf.Bytes(), "gzip"
		}
		resp, body := e.do("POST", edgewire.RunsPath, e.token, data, header)
		var res edgewire.RunBatchResult
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &res) != nil {
			t.Fatalf("POST runs: %d %s", resp.StatusCode, body)
		}
		return res
	}
	refused := run("run_b") // a call refused at the edge: why travels with the run
	refused.Status, refused.StatusCode, refused.ErrorCode = "error", 429, "rate_limit_exceeded"
	first := edgewire.RunBatchV1{BatchID: "batch_1", Runs: []edgewire.RunV1{run("run_a"), refused},
		Touches: []edgewire.Touch{{KeyID: key.Key.ID, UsedAt: now}}}
	if res := post(first, true); res.Inserted != 2 || res.Replayed {
		t.Fatalf("first batch: %+v", res)
	}
	if res := post(first, false); !res.Replayed || res.Inserted != 0 {
		t.Fatalf("the same batch again: %+v", res)
	}
	// A run sent again in another batch (an edge that lost track) is not written twice either; a run of
	// a deployment that is gone is dropped and counted.
	ghost := run("run_ghost")
	ghost.DeploymentID = "dep_gone"
	usageOnly := run("run_u") // retention none: counted, not stored
	usageOnly.UsageOnly = true
	if res := post(edgewire.RunBatchV1{BatchID: "batch_2", Runs: []edgewire.RunV1{run("run_b"), run("run_c"), ghost, usageOnly}}, true); res.Inserted != 1 || res.Duplicates != 1 || res.Rejected != 1 || res.UsageOnly != 1 {
		t.Fatalf("overlapping batch: %+v", res)
	}
	if res := post(edgewire.RunBatchV1{BatchID: "batch_2", Runs: []edgewire.RunV1{run("run_b"), run("run_c"), ghost, usageOnly}}, false); !res.Replayed {
		t.Fatalf("the second batch again: %+v", res)
	}
	// The usage aggregates count each request once: a, b, c and the usage-only one.
	usage, err := e.sdk.GetDeploymentUsage(ctx, d.ID, cloudapi.UsageWindow(time.Now(), 2, cloudapi.GranularityHour))
	if err != nil {
		t.Fatal(err)
	}
	var requests, tokens int64
	for _, b := range usage.Buckets {
		requests += b.Requests
		tokens += b.PromptTokens + b.CompletionTokens
	}
	if requests != 4 || tokens != 4*7 {
		t.Fatalf("usage counts %d requests and %d tokens, want 4 and 28: %+v", requests, tokens, usage.Buckets)
	}
	page, err := e.sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
	if err != nil || len(page.Runs) != 3 {
		t.Fatalf("runs: %+v %v", page, err)
	}
	got, err := e.sdk.GetRun(ctx, d.ID, "run_b")
	if err != nil || got.Status != "error" || got.StatusCode != 429 || got.ErrorCode != "rate_limit_exceeded" {
		t.Fatalf("shipped failed run: %+v %v", got, err)
	}
	keys, err := e.sdk.ListDeploymentKeys(ctx, d.ID)
	if err != nil || keys[0].LastUsedAt == nil || keys[0].LastUsedAt.Sub(now).Abs() > time.Millisecond {
		t.Fatalf("lastUsedAt after a batch: %+v %v", keys, err)
	}

	for what, body := range map[string]string{
		"no batch id":    `{"runs":[]}`,
		"bad status":     `{"batchId":"b3","runs":[{"id":"r","deploymentId":"` + d.ID + `","status":"maybe","createdAt":"2026-01-01T00:00:00Z"}]}`,
		"not JSON":       `runs please`,
		"touch, no time": `{"batchId":"b4","touches":[{"keyId":"k"}]}`,
	} {
		resp, got := e.do("POST", edgewire.RunsPath, e.token, []byte(body), nil)
		envelope(t, what, resp.StatusCode, got, 400, "invalid_request")
	}
}

func TestChangeFeedStreamsChangesAsTheyCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "followed", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	open := func(after string) (*bufio.Reader, func()) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.BaseURL+edgewire.ChangesPath+after, nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("feed: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return bufio.NewReader(resp.Body), func() { cancel(); resp.Body.Close() }
	}
	// next returns the next event's name and data, skipping heartbeats unless asked for.
	next := func(rd *bufio.Reader, heartbeats bool) (string, string) {
		t.Helper()
		var name, data string
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("feed ended: %v", err)
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "event: "):
				name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				data = line[len("data: "):]
			case line == "" && name != "":
				if name != edgewire.EventHeartbeat || heartbeats {
					return name, data
				}
				name, data = "", ""
			}
		}
	}

	rd, stop := open("")
	name, data := next(rd, false)
	var hello edgewire.Hello
	if name != edgewire.EventHello || json.Unmarshal([]byte(data), &hello) != nil || !hello.Reset || hello.Head < 1 {
		t.Fatalf("first event %s %s", name, data)
	}
	if name, _ := next(rd, true); name != edgewire.EventHeartbeat {
		t.Fatalf("an idle feed sent %s, want a heartbeat", name)
	}
	off := false
	start := time.Now()
	if _, err := e.sdk.UpdateDeployment(ctx, d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	name, data = next(rd, false)
	var ch edgewire.Change
	if name != edgewire.EventChange || json.Unmarshal([]byte(data), &ch) != nil || ch.Slug != "followed" || ch.ID != hello.Head+1 {
		t.Fatalf("after a disable: %s %s", name, data)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the change took %v to arrive", took)
	}
	stop()

	// A follower that resumes from its position gets what it missed, in order, and no reset.
	if err := e.sdk.DeleteDeployment(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	rd, stop = open("?after=" + strconv.FormatInt(ch.ID, 10))
	defer stop()
	name, data = next(rd, false)
	if name != edgewire.EventHello || !strings.Contains(data, `"reset":false`) {
		t.Fatalf("resumed hello %s %s", name, data)
	}
	if name, data = next(rd, false); name != edgewire.EventChange || !strings.Contains(data, `"slug":"followed"`) || !strings.Contains(data, `"id":`+strconv.FormatInt(ch.ID+1, 10)) {
		t.Fatalf("missed change %s %s", name, data)
	}
	resp, body := e.do("GET", edgewire.ChangesPath+"?after=x", e.token, nil, nil)
	envelope(t, "bad position", resp.StatusCode, body, 400, "invalid_request")

	// Revoking the edge token cuts the feed it holds, at the next heartbeat (100 ms here).
	if err := e.srv.Service.RevokeEdgeToken(ctx, "edge-1"); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, rd)
		ended <- err
	}()
	select {
	case <-ended:
	case <-time.After(2 * time.Second):
		t.Fatal("the feed of a revoked edge token is still open")
	}
	resp, body = e.do("GET", edgewire.ChangesPath, e.token, nil, nil)
	envelope(t, "feed with the revoked token", resp.StatusCode, body, 401, "unauthorized")
}

// TestRunBatchesAreBoundedAndStreamed: a batch over the byte cap (sent as is, or gzip-compressed and
// inflating past it) or over the run cap is refused with a 413 that says which, and writes nothing; a
// batch that fails half-way writes nothing either; a batch larger than what is held in memory (its
// body waits in a temporary file) is applied whole; fields may come in any order.
func TestRunBatchesAreBoundedAndStreamed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "bounded", AuthMode: "none", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	run := func(id, request string) edgewire.RunV1 {
		return edgewire.RunV1{ID: id, DeploymentID: d.ID, Model: "m", Status: "ok", CreatedAt: now, Request: request, Response: `{}`}
	}
	gz := func(data []byte) []byte {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(data)
		zw.Close()
		return buf.Bytes()
	}
	stored := func() int {
		t.Helper()
		n, cursor := 0, ""
		for {
			page, err := e.sdk.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{Limit: 200, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			n += len(page.Runs)
			if cursor = page.NextCursor; cursor == "" {
				return n
			}
		}
	}

	many := edgewire.RunBatchV1{BatchID: "too_many"}
	for i := 0; i <= edgewire.MaxRunBatchRuns; i++ {
		many.Runs = append(many.Runs, run(fmt.Sprintf("run_many_%d", i), `{}`))
	}
	data, _ := json.Marshal(many)
	resp, body := e.do("POST", edgewire.RunsPath, e.token, gz(data), map[string]string{"Content-Encoding": "gzip"})
	envelope(t, "too many runs", resp.StatusCode, body, 413, "body_too_large")
	if !strings.Contains(body, strconv.Itoa(edgewire.MaxRunBatchRuns)+" runs") {
		t.Fatalf("the 413 does not say how many runs a batch may hold: %s", body)
	}

	big := strings.Repeat("a", edgewire.MaxRunBatchBytes)
	data, _ = json.Marshal(edgewire.RunBatchV1{BatchID: "bomb", Runs: []edgewire.RunV1{run("run_ok", `{}`), run("run_bomb", big)}})
	resp, body = e.do("POST", edgewire.RunsPath, e.token, gz(data), map[string]string{"Content-Encoding": "gzip"})
	envelope(t, "inflates past the cap", resp.StatusCode, body, 413, "body_too_large")
	if !strings.Contains(body, "MiB") {
		t.Fatalf("the 413 does not name the cap: %s", body)
	}
	resp, body = e.do("POST", edgewire.RunsPath, e.token, data, nil)
	envelope(t, "past the cap as sent", resp.StatusCode, body, 413, "body_too_large")

	// Key uses alone (an idle edge): runs is null.
	resp, body = e.do("POST", edgewire.RunsPath, e.token, []byte(`{"batchId":"touches_only","runs":null,"touches":[]}`), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("a batch without runs: %d %s", resp.StatusCode, body)
	}

	// The first run is fine, the second is not: the batch is refused whole.
	data = []byte(`{"batchId":"half","runs":[` + string(must(json.Marshal(run("run_half_1", `{}`)))) + `,{"id":"run_half_2"}]}`)
	resp, body = e.do("POST", edgewire.RunsPath, e.token, data, nil)
	envelope(t, "half a batch", resp.StatusCode, body, 400, "invalid_request")
	if n := stored(); n != 0 {
		t.Fatalf("%d runs stored from refused batches", n)
	}

	// 8 MiB of runs, sent runs first, batch id last, with a field this control plane does not know.
	var runs []string
	for i := 0; i < 8; i++ {
		runs = append(runs, string(must(json.Marshal(run(fmt.Sprintf("run_big_%d", i), `{"x":"`+strings.Repeat("b", 1<<20)+`"}`)))))
	}
	data = []byte(`{"runs":[` + strings.Join(runs, ",") + `],"fromTheFuture":{"a":[1,2]},"batchId":"big"}`)
	resp, body = e.do("POST", edgewire.RunsPath, e.token, data, nil)
	var res edgewire.RunBatchResult
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &res) != nil || res.Inserted != 8 {
		t.Fatalf("an 8 MiB batch: %d %s", resp.StatusCode, body)
	}
	if n := stored(); n != 8 {
		t.Fatalf("%d runs stored, want 8", n)
	}
	run0, err := e.sdk.GetRun(ctx, d.ID, "run_big_0")
	if err != nil || len(run0.Request) < 1<<20 {
		t.Fatalf("a run of the big batch: %d bytes, %v", len(run0.Request), err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
