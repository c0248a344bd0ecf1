package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// endpointClient sends requests to an endpoint through the process listening on addr: base is the
// endpoint's URL (http://<slug>.edge.test for an edge, the control plane's /e/<slug> form for it).
type endpointClient struct {
	t      *testing.T
	client *http.Client
	base   string
	key    string
}

func newEndpointClient(t *testing.T, addr, base, key string) *endpointClient {
	return &endpointClient{t: t, base: base, key: key, client: &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}}
}

// do sends one request and returns its status, headers and body.
func (c *endpointClient) do(method, path, body string) (int, http.Header, string) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// response is what the test reads of a Responses answer.
type response struct {
	ID     string `json:"id"`
	Output []struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// respond sends a Responses request that must succeed.
func (c *endpointClient) respond(body string) (response, string) {
	c.t.Helper()
	status, _, answer := c.do("POST", "/v1/responses", body)
	var r response
	if status != 200 || json.Unmarshal([]byte(answer), &r) != nil || r.ID == "" {
		c.t.Fatalf("POST %s/v1/responses %s: %d %s", c.base, body, status, answer)
	}
	return r, answer
}

// openAIError checks that body is an error in the OpenAI shape with this code.
func openAIError(t *testing.T, what string, status int, body string, wantStatus int, wantCode string) {
	t.Helper()
	var env struct {
		Error *struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    string  `json:"code"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	if status != wantStatus || json.Unmarshal([]byte(body), &env) != nil || env.Error == nil || env.Error.Code != wantCode ||
		env.Error.Message == "" || env.Error.Type == "" {
		t.Fatalf("%s: %d %s; want %d %s in the OpenAI shape", what, status, body, wantStatus, wantCode)
	}
}

// waitRun waits until the control plane stores the run of a response (edges ship runs in batches).
func waitRun(t *testing.T, sdk *cloudapi.Client, deploymentID, responseID string) {
	t.Helper()
	runID := "run_" + strings.TrimPrefix(responseID, "resp_")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err := sdk.GetRun(context.Background(), deploymentID, runID)
		if err == nil {
			return
		}
		var ce *cloudapi.Error
		if !errors.As(err, &ce) || ce.Status != 404 || time.Now().After(deadline) {
			t.Fatalf("the run of %s on the control plane: %v", responseID, err)
		}
	}
}

// waitReadyz waits until the edge at addr has synced with its control plane (its feed said hello).
func waitReadyz(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("edge %s not ready: %v %v", addr, resp, err)
		}
	}
}

// TestEdgesContinueResponsesAndThinkingLikeTheControlPlane runs the real binaries: a control plane
// and two edges. A response answered by edge A is continued (previous_response_id) and read (GET
// /v1/responses/{id}) on edge B once its run is shipped, as on the control plane, retention "none"
// included; a thinking block signed by edge A verifies on edge B and on the control plane, and on
// edge A again after it restarted with the control plane down, when stored responses it does not hold
// are a 503, not a hang. No process prints the edge token or the thinking key.
func TestEdgesContinueResponsesAndThinkingLikeTheControlPlane(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	data, spoolA := filepath.Join(home, "data"), filepath.Join(home, "spool-a")
	env := svcEnv(home)
	cpAddr := freeAddr(t)
	api := "http://" + cpAddr
	cp, _ := startProcess(t, dir, env, apiLine, "server", "--addr", cpAddr, "--data", data)
	token := strings.TrimSpace(runSvc(t, dir, env, "edge-tokens", "create", "edges", "--data", data).stdout)
	edgeAddrA := freeAddr(t)
	startEdge := func(addr, spool string) *devProcess {
		p, _ := startEdge(t, dir, home, token, api, "--addr", addr, "--spool-dir", spool, "--max-stale", "5m")
		return p
	}
	edgeA := startEdge(edgeAddrA, spoolA)
	edgeAddrB := freeAddr(t)
	edgeB := startEdge(edgeAddrB, filepath.Join(home, "spool-b"))
	waitReadyz(t, edgeAddrA)
	waitReadyz(t, edgeAddrB)

	ctx := context.Background()
	sdk, err := cloudapi.New(api, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deploy := func(slug, retention string) (*cloudapi.Deployment, string) {
		d, err := sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, Target: cloudapi.Target{Kind: "multi_model"},
			RunRetentionMode: retention})
		if err != nil {
			t.Fatal(err)
		}
		key, err := sdk.IssueDeploymentKey(ctx, d.ID, "k")
		if err != nil {
			t.Fatal(err)
		}
		return d, key.Plaintext
	}
	d, key := deploy("parity", "")
	a := newEndpointClient(t, edgeAddrA, "http://parity.edge.test", key)
	b := newEndpointClient(t, edgeAddrB, "http://parity.edge.test", key)
	server := newEndpointClient(t, cpAddr, api+"/e/parity", key)

	// (a) A response answered by edge A, continued and read on edge B once its run is shipped.
	first, firstAnswer := a.respond(`{"model":"sim-llama-3.1-8b-instruct","input":"the first turn names a lighthouse called Fastnet"}`)
	waitRun(t, sdk, d.ID, first.ID)
	alone, _ := b.respond(`{"model":"sim-llama-3.1-8b-instruct","input":"which lighthouse did I name"}`)
	continued, _ := b.respond(`{"model":"sim-llama-3.1-8b-instruct","input":"which lighthouse did I name","previous_response_id":"` + first.ID + `"}`)
	// The simulator echoes the last message, so the history shows in the prompt it was given: the
	// earlier turn's input and answer on top of the same question.
	if grew := continued.Usage.InputTokens - alone.Usage.InputTokens; grew < first.Usage.InputTokens {
		t.Fatalf("edge B did not continue the response: %d input tokens continued, %d alone; the earlier turn had %d",
			continued.Usage.InputTokens, alone.Usage.InputTokens, first.Usage.InputTokens)
	}
	viaServer, _ := server.respond(`{"model":"sim-llama-3.1-8b-instruct","input":"which lighthouse did I name","previous_response_id":"` + first.ID + `"}`)
	if viaServer.Usage.InputTokens != continued.Usage.InputTokens {
		t.Fatalf("edge B continued with %d input tokens, the control plane with %d", continued.Usage.InputTokens, viaServer.Usage.InputTokens)
	}
	status, _, got := b.do("GET", "/v1/responses/"+first.ID, "")
	if status != 200 || strings.TrimSpace(got) != strings.TrimSpace(firstAnswer) {
		t.Fatalf("GET the response on edge B: %d %s\nedge A answered: %s", status, got, firstAnswer)
	}
	status, _, got = b.do("GET", "/v1/responses/resp_0000000000000000000000", "")
	openAIError(t, "GET an unknown response on edge B", status, got, 404, "not_found")
	status, _, got = b.do("POST", "/v1/responses", `{"model":"sim-llama-3.1-8b-instruct","input":"hi","previous_response_id":"resp_0000000000000000000000"}`)
	openAIError(t, "continue an unknown response on edge B", status, got, 400, "previous_response_not_found")
	// Malformed ids are judged by their form on every process, never put in the control plane's URL
	// (where edge B answered them 503, which SDKs retry).
	for name, id := range map[string]string{"a slash": "resp_abc/def", "64 KiB": "resp_" + strings.Repeat("a", 64<<10)} {
		for who, c := range map[string]*endpointClient{"edge B": b, "the control plane": server} {
			status, _, got = c.do("POST", "/v1/responses", `{"model":"sim-llama-3.1-8b-instruct","input":"hi","previous_response_id":"`+id+`"}`)
			openAIError(t, "continue an id with "+name+" on "+who, status, got, 400, "previous_response_not_found")
			if len(got) > 2048 {
				t.Errorf("the answer to an id with %s on %s repeats it whole (%d bytes)", name, who, len(got))
			}
		}
	}

	// Retention none keeps no response, on any process, even the edge that answered it.
	_, forgetfulKey := deploy("forgetful", "none")
	forgetA := newEndpointClient(t, edgeAddrA, "http://forgetful.edge.test", forgetfulKey)
	forgotten, _ := forgetA.respond(`{"model":"sim-llama-3.1-8b-instruct","input":"forget me"}`)
	for name, c := range map[string]*endpointClient{"edge A": forgetA, "edge B": newEndpointClient(t, edgeAddrB, "http://forgetful.edge.test", forgetfulKey),
		"the control plane": newEndpointClient(t, cpAddr, api+"/e/forgetful", forgetfulKey)} {
		status, _, got := c.do("GET", "/v1/responses/"+forgotten.ID, "")
		openAIError(t, "GET a response of retention none on "+name, status, got, 404, "not_found")
		status, _, got = c.do("POST", "/v1/responses", `{"input":"again","previous_response_id":"`+forgotten.ID+`"}`)
		openAIError(t, "continue a response of retention none on "+name, status, got, 400, "previous_response_not_found")
		if !strings.Contains(got, "retention is none") {
			t.Fatalf("%s does not say why: %s", name, got)
		}
	}

	// (b) A thinking block signed by edge A verifies on edge B and on the control plane.
	think := func(c *endpointClient) string {
		t.Helper()
		status, _, got := c.do("POST", "/v1/messages", `{"model":"sim-qwen3-8b","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},`+
			`"messages":[{"role":"user","content":"why is the sea salty"}]}`)
		var m struct {
			Content []json.RawMessage `json:"content"`
		}
		if status != 200 || json.Unmarshal([]byte(got), &m) != nil || len(m.Content) < 2 || !strings.Contains(string(m.Content[0]), `"type":"thinking"`) {
			t.Fatalf("a thinking answer from %s: %d %s", c.base, status, got)
		}
		return string(m.Content[0])
	}
	nextTurn := func(block string) string {
		return `{"model":"sim-qwen3-8b","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[` +
			`{"role":"user","content":"why is the sea salty"},{"role":"assistant","content":[` + block + `,{"type":"text","text":"rivers"}]},` +
			`{"role":"user","content":"and the rivers?"}]}`
	}
	accepts := func(name string, c *endpointClient, block string) bool {
		t.Helper()
		status, h, got := c.do("POST", "/v1/messages", nextTurn(block))
		if status != 200 {
			t.Fatalf("the next turn on %s: %d %s", name, status, got)
		}
		return !strings.Contains(h.Get("Svc-Ignored-Fields"), "thinking")
	}
	signedByA := think(a)
	for name, c := range map[string]*endpointClient{"edge B": b, "the control plane": server, "edge A": a} {
		if !accepts(name, c, signedByA) {
			t.Fatalf("%s left out the thinking block signed by edge A", name)
		}
	}
	tampered := strings.Replace(signedByA, `"signature":"svc1`, `"signature":"svc1A`, 1)
	if accepts("edge B", b, tampered) {
		t.Fatal("edge B took a thinking block whose signature is not svc's")
	}

	// Edge A restarted while the control plane is down: it keeps the key it had (saved in its spool
	// folder with the snapshots), and a stored response it does not hold is a 503, answered at once.
	if code := edgeA.interrupt(t); code != 0 {
		t.Fatalf("svc edge exited %d on Ctrl-C\n%s", code, edgeA.stderr.String())
	}
	saved, err := os.ReadFile(filepath.Join(spoolA, "snapshots.json"))
	if err != nil || !strings.Contains(string(saved), `"thinkingSecret"`) {
		t.Fatalf("edge A's saved snapshots hold no thinking key: %v", err)
	}
	if code := cp.interrupt(t); code != 0 {
		t.Fatalf("svc server exited %d", code)
	}
	firstA := edgeA
	edgeA = startEdge(edgeAddrA, spoolA)
	if !accepts("edge A restarted", a, signedByA) {
		t.Fatalf("edge A, restarted with the control plane down, left out the thinking block it signed before\n%s", edgeA.stderr.String())
	}
	if !accepts("edge B, control plane down", b, think(a)) {
		t.Fatal("edge B left out a thinking block signed by the restarted edge A")
	}
	start := time.Now()
	status, h, got := a.do("GET", "/v1/responses/"+first.ID, "")
	openAIError(t, "GET a stored response, control plane down", status, got, 503, "service_unavailable")
	if h.Get("Retry-After") == "" || time.Since(start) > 10*time.Second {
		t.Fatalf("503 without Retry-After, or after %v", time.Since(start))
	}
	status, _, got = a.do("POST", "/v1/responses", `{"input":"and then?","previous_response_id":"`+first.ID+`"}`)
	openAIError(t, "continue a stored response, control plane down", status, got, 503, "service_unavailable")

	// No process printed the edge token or the thinking key.
	var file struct {
		ThinkingSecret string `json:"thinkingSecret"`
	}
	if json.Unmarshal(saved, &file) != nil || file.ThinkingSecret == "" {
		t.Fatalf("snapshots.json: %.200s", saved)
	}
	for name, p := range map[string]*devProcess{"control plane": cp, "edge A": firstA, "edge A restarted": edgeA, "edge B": edgeB} {
		out := p.stdout.String() + p.stderr.String()
		if strings.Contains(out, token) || strings.Contains(out, file.ThinkingSecret) {
			t.Fatalf("the %s printed a secret", name)
		}
	}
}
