package edge_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/mockupstream"
	"github.com/svcdev/svc/internal/server"
	"github.com/svcdev/svc/internal/tracing"
)

const upstreamKey = "upstream-secret-3f9a1c"

// env is a running server whose catalog has simulated models and models proxied to a mock upstream.
type env struct {
	t       testing.TB
	srv     *server.Server
	mock    *mockupstream.Server
	mockURL string
	// mockConns counts the connections the mock upstream accepted.
	mockConns *atomic.Int64
	pr        core.Project
	principal core.Principal
	token     string // the anonymous identity's bearer token, owner of pr
	client    *http.Client
	// db reads what the server stored (runs), over a connection of the test's own.
	db *sql.DB
}

const modelsYAML = `models:
  - name: sim-echo
    runtime: simulator
    public: true
    default: true
    supportsMessages: true
    routes: [embeddings, completions]
    simulator: {mode: echo, ttftMs: 0, itlMs: 0, embeddingDim: 32}
  - name: sim-think
    runtime: simulator
    supportsMessages: true
    reasoning: chat_template_kwargs
    simulator: {mode: echo, ttftMs: 0, itlMs: 0}
  - name: sim-lorem
    runtime: simulator
    public: true
    simulator: {mode: lorem, loremTokens: 10, itlMs: 1}
  - name: sim-slow
    runtime: simulator
    public: true
    simulator: {mode: lorem, loremTokens: 200, ttftMs: 5, itlMs: 20}
  - name: up
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    public: true
    supportsMessages: true
    lora: vllm
    timeoutMs: 1500
  - name: up-counted
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    supportsMessages: true
    continuousUsage: true
  - name: up-native
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    supportsMessages: true
    upstreamMessages: true
  - name: up-responses
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    supportsResponses: true
    routes: [completions]
  - name: up-down
    runtime: openai
    upstreamUrl: http://127.0.0.1:1/v1
  - name: base-private
    runtime: simulator
`

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, envOptions{})
}

// envOptions change what newEnvWith starts.
type envOptions struct {
	logTo    io.Writer     // the server's log, as JSON (default: discarded)
	logLevel slog.Level    // its level (default info)
	logEvery time.Duration // the interval of failure counts (0: the default)
	tracer   *tracing.Tracer
	// upstreamSaw, when set, sees each request the mock upstream receives, before the mock answers it.
	upstreamSaw func(*http.Request)
	// models are more entries of the models file (%[1]s is the mock's URL): a model with replicas
	// probes and scrapes them, which tests counting the mock's connections must not see.
	models string
	// redis, a redis:// URL, counts the rate limits there (svc server --redis).
	redis string
}

func newEnvWith(t testing.TB, o envOptions) *env {
	t.Helper()
	t.Setenv("SVC_TEST_UPSTREAM_KEY", upstreamKey)
	mock := mockupstream.New(mockupstream.Config{APIKey: upstreamKey, StrictModels: true, ServeMessages: true, ServeResponses: true, ServeTokenize: true}, true)
	var upstream http.Handler = mock
	if o.upstreamSaw != nil {
		upstream = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o.upstreamSaw(r)
			mock.ServeHTTP(w, r)
		})
	}
	ts := httptest.NewUnstartedServer(upstream)
	mockConns := &atomic.Int64{}
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mockConns.Add(1)
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)

	dir := t.TempDir()
	models := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(models, []byte(fmt.Sprintf(modelsYAML+o.models, ts.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	if o.logTo == nil {
		o.logTo = io.Discard
	}
	log := slog.New(slog.NewJSONHandler(o.logTo, &slog.HandlerOptions{Level: o.logLevel}))
	srv, err := server.Start(context.Background(), server.Config{Addr: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), ModelsFile: models,
		Logger: log, LogEvery: o.logEvery, Tracer: o.tracer, Redis: o.redis})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })

	ctx := context.Background()
	sqldb, err := db.OpenFile(ctx, filepath.Join(dir, "data", "svc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sqldb.Close() })
	// Edge tests create many endpoints with one anonymous identity; the cap is tested in handlers/api.
	srv.Service.AnonymousEndpointLimit = 1 << 20
	anon, err := srv.Service.MintAnonymous(ctx, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := srv.Service.Authenticate(ctx, anon.Token)
	if err != nil {
		t.Fatal(err)
	}
	scope, err := srv.Service.AnonymousScope(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := srv.Service.Project(ctx, p, scope.OrgSlug, scope.Slug)
	if err != nil {
		t.Fatal(err)
	}
	// Go cannot resolve *.localhost: dial every host on loopback to the server.
	addr := srv.Addr.String()
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &env{t: t, srv: srv, mock: mock, mockURL: ts.URL, mockConns: mockConns, pr: pr, principal: p, token: anon.Token, db: sqldb, client: &http.Client{Transport: tr, Timeout: 20 * time.Second}}
}

// deploy creates a deployment and, in fixed-key mode, one key whose plaintext it returns.
func (e *env) deploy(slug string, target cloudapi.Target, auth string, retention string, days int) (*core.Deployment, string) {
	e.t.Helper()
	ctx := context.Background()
	req := core.NewDeployment{Slug: slug, Target: edgemodel.Target{Kind: target.Kind, JobID: target.JobID, Step: target.Step, Model: target.Model}}
	if auth != "" {
		req.AuthMode = &auth
	}
	if retention != "" {
		req.RetentionMode = &retention
	}
	if days != 0 {
		req.RetentionDays = &days
	}
	d, err := e.srv.Service.CreateDeployment(ctx, e.principal, e.pr, req)
	if err != nil {
		e.t.Fatalf("create deployment %s: %v", slug, err)
	}
	if d.AuthMode != cloudapi.AuthFixedAPIKey {
		return d, ""
	}
	k, err := e.srv.Service.IssueKey(ctx, e.pr, d.ID, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return d, k.Plaintext
}

func (e *env) update(id string, req cloudapi.UpdateDeploymentRequest) {
	e.t.Helper()
	change := core.DeploymentChange{AuthMode: req.AuthMode, Enabled: req.Enabled, RetentionMode: req.RunRetentionMode, RetentionDays: req.RunRetentionDays}
	if req.Target != nil {
		change.Target = &edgemodel.Target{Kind: req.Target.Kind, JobID: req.Target.JobID, Step: req.Target.Step, Model: req.Target.Model}
	}
	if _, err := e.srv.Service.UpdateDeployment(context.Background(), e.pr, id, change); err != nil {
		e.t.Fatal(err)
	}
}

// reply is an edge answer.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("answer %d is not JSON: %v\n%s", r.status, err, r.body)
	}
	return m
}

// do calls the edge of slug on its host name, with header "Authorization: Bearer key" when key is set.
func (e *env) do(method, slug, path, key string, body any) reply {
	e.t.Helper()
	return e.doHeaders(method, slug, path, body, map[string]string{"Authorization": bearer(key)})
}

func bearer(key string) string {
	if key == "" {
		return ""
	}
	return "Bearer " + key
}

func (e *env) doHeaders(method, slug, path string, body any, headers map[string]string) reply {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, "http://"+slug+"."+e.srv.EndpointDomain+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{resp.StatusCode, resp.Header, b}
}

// chatBody is a minimal chat completions request.
func chatBody(text string, extra ...any) map[string]any {
	m := map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

// sseData returns the data fields of an event stream, in order.
func sseData(body []byte) []string {
	var out []string
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, v)
		}
	}
	return out
}

// wantError checks an OpenAI error envelope.
func wantError(t *testing.T, r reply, status int, code string) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if (status == 401 || status == 403 || status == 404) && r.header.Get("X-Should-Retry") != "false" {
		t.Errorf("a %d without x-should-retry: false (%q): SDKs retry it", status, r.header.Get("X-Should-Retry"))
	}
	m := r.json(t)
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error object: %s", r.body)
	}
	for _, f := range []string{"message", "type", "code", "param"} {
		if _, ok := e[f]; !ok {
			t.Errorf("error lacks %q: %s", f, r.body)
		}
	}
	if code != "" && e["code"] != code {
		t.Errorf("code %v, want %s: %s", e["code"], code, r.body)
	}
	return e
}

// runs waits for the recorder to write n runs of a deployment and returns them.
func (e *env) runs(deploymentID string, n int) []map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows, err := e.db.Query(`SELECT id, coalesce(key_id, ''), model, status, prompt_tokens, completion_tokens,
			created_at, expires_at, request, response, status_code, error_code FROM runs WHERE deployment_id = ? ORDER BY created_at, id`, deploymentID)
		if err != nil {
			e.t.Fatal(err)
		}
		var out []map[string]any
		for rows.Next() {
			var id, key, model, status, req, resp, errCode string
			var pt, ct, created, statusCode int64
			var expires *int64
			if err := rows.Scan(&id, &key, &model, &status, &pt, &ct, &created, &expires, &req, &resp, &statusCode, &errCode); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, map[string]any{"id": id, "keyId": key, "model": model, "status": status, "promptTokens": pt,
				"completionTokens": ct, "createdAt": created, "expiresAt": expires, "request": req, "response": resp,
				"statusCode": statusCode, "errorCode": errCode})
		}
		rows.Close()
		if len(out) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}
