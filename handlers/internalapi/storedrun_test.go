package internalapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/edgewire"
	"github.com/svcdev/svc/internal/translate"
)

// endpointCall sends body to the control plane's own edge for slug and returns the status and answer.
func (e *env) endpointCall(slug, path, key, body string) (int, string) {
	e.t.Helper()
	resp, b := e.do("POST", "/e/"+slug+path, key, []byte(body), map[string]string{"Content-Type": "application/json"})
	return resp.StatusCode, b
}

// An edge reads back a stored run of a deployment, as the control plane's own edge reads it for
// previous_response_id and GET /v1/responses/{id}: the request and response it recorded. A run that is
// not stored, or another deployment's, is 404 with Svc-Not-Found: run.
func TestStoredRunsAreReadBackByEdges(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "remembers", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "another", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.sdk.IssueDeploymentKey(ctx, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	status, answer := e.endpointCall("remembers", "/v1/responses", key.Plaintext, `{"input":"remember the lighthouse"}`)
	var r struct {
		ID string `json:"id"`
	}
	if status != 200 || json.Unmarshal([]byte(answer), &r) != nil || !strings.HasPrefix(r.ID, "resp_") {
		t.Fatalf("a response: %d %s", status, answer)
	}
	runID := "run_" + strings.TrimPrefix(r.ID, "resp_")
	path := edgewire.StoredRunsPath + d.ID + "/" + runID

	var resp *http.Response
	var body string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, body = e.do("GET", path, e.token, nil, nil); resp.StatusCode != 404 || time.Now().After(deadline) {
			break // runs are written in batches: 404 until then
		}
	}
	var stored edgewire.StoredRun
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &stored) != nil {
		t.Fatalf("the stored run: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(stored.Request, "remember the lighthouse") || stored.Response != strings.TrimSpace(answer) {
		t.Fatalf("the stored run is not the call as recorded: %+v\nanswered: %s", stored, answer)
	}
	run, err := e.sdk.GetRun(ctx, d.ID, runID)
	if err != nil || string(run.Request) != stored.Request {
		t.Fatalf("the management API's run: %+v %v", run, err)
	}

	for what, p := range map[string]string{
		"an unknown run":              edgewire.StoredRunsPath + d.ID + "/run_0000000000000000000000",
		"another deployment's run":    edgewire.StoredRunsPath + other.ID + "/" + runID,
		"an unknown deployment's run": edgewire.StoredRunsPath + "dep_nothere/" + runID,
	} {
		resp, body := e.do("GET", p, e.token, nil, nil)
		envelope(t, what, resp.StatusCode, body, 404, "not_found")
		if resp.Header.Get(edgewire.NotFoundHeader) != "run" {
			t.Errorf("%s: no %s header", what, edgewire.NotFoundHeader)
		}
	}
	resp, body = e.do("GET", edgewire.StoredRunsPath+d.ID, e.token, nil, nil)
	envelope(t, "a path without a run id", resp.StatusCode, body, 404, "not_found")
	if resp.Header.Get(edgewire.NotFoundHeader) != "" {
		t.Error("a path that is no route says a run was not found")
	}
	resp, body = e.do("POST", path, e.token, nil, nil)
	envelope(t, "POST on a stored run", resp.StatusCode, body, 405, "method_not_allowed")
}

// The change feed's hello carries the key the control plane signs thinking with, so that a thinking
// block signed by the control plane's edge verifies on every svc edge, and the other way round.
func TestHelloCarriesTheThinkingKey(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "thinks", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := e.sdk.IssueDeploymentKey(ctx, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	hello := func() edgewire.Hello {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.BaseURL+edgewire.ChangesPath, nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		for {
			line, err := rd.ReadString('\n')
			if err == io.EOF || err != nil {
				t.Fatalf("feed ended before its hello: %v", err)
			}
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
				var h edgewire.Hello
				if err := json.Unmarshal([]byte(data), &h); err != nil {
					t.Fatal(err)
				}
				return h
			}
		}
	}
	h := hello()
	if len(h.ThinkingSecret) != 32 {
		t.Fatalf("hello: %+v", h)
	}
	if again := hello(); string(again.ThinkingSecret) != string(h.ThinkingSecret) {
		t.Fatal("another connection's hello carries another key")
	}

	status, answer := e.endpointCall("thinks", "/v1/messages", key.Plaintext,
		`{"model":"sim-qwen3-8b","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"why is the sky blue"}]}`)
	var m struct {
		Content []json.RawMessage `json:"content"`
	}
	if status != 200 || json.Unmarshal([]byte(answer), &m) != nil || len(m.Content) == 0 || !strings.Contains(string(m.Content[0]), `"signature"`) {
		t.Fatalf("a thinking answer: %d %s", status, answer)
	}
	next := `{"model":"sim-qwen3-8b","max_tokens":200,"messages":[{"role":"user","content":"why is the sky blue"},` +
		`{"role":"assistant","content":[` + string(m.Content[0]) + `]},{"role":"user","content":"and at sunset?"}]}`
	verified := func(secret []byte) bool {
		_, info, terr := translate.MessagesToChatWith([]byte(next), translate.Options{Secret: secret})
		if terr != nil {
			t.Fatal(terr)
		}
		return !strings.Contains(info.IgnoredHeader(), "thinking")
	}
	if !verified(h.ThinkingSecret) {
		t.Fatal("the control plane's signature does not verify under the hello's key")
	}
	if verified([]byte("another key of thirty-two bytes!")) {
		t.Fatal("a signature verifies under any key")
	}
	if strings.Contains(e.logs.String(), string(h.ThinkingSecret)) {
		t.Fatal("the log holds the key")
	}
}
