package edge_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/internal/poll"
)

func TestRunRecording(t *testing.T) {
	e := newEnv(t)
	day := int64(24 * time.Hour / time.Millisecond)

	d, key := e.deploy("rec-ep", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 3)
	e.do("POST", "rec-ep", "/v1/chat/completions", key, chatBody("first run"))
	e.do("POST", "rec-ep", "/v1/chat/completions", key, chatBody("streamed run", "stream", true))
	runs := e.runs(d.ID, 2)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	for _, r := range runs {
		exp := r["expiresAt"].(*int64)
		if exp == nil || *exp != r["createdAt"].(int64)+3*day {
			t.Errorf("expiresAt %v, want createdAt + 3 days", exp)
		}
		if r["status"] != "ok" || r["model"] != "up" || r["keyId"] == "" || r["completionTokens"].(int64) != 8 || r["promptTokens"].(int64) == 0 {
			t.Errorf("run %v", r)
		}
	}
	// The streamed run's response is an assembled chat.completion. Both runs may share a millisecond,
	// so find it by its request.
	streamed := runs[0]
	if !strings.Contains(streamed["request"].(string), "streamed run") {
		streamed = runs[1]
	}
	var resp struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(streamed["response"].(string)), &resp); err != nil || resp.Object != "chat.completion" ||
		len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" {
		t.Errorf("assembled stream response: %s", streamed["response"])
	}
	if streamed["request"] != `{"messages":[{"content":"streamed run","role":"user"}],"stream":true}` {
		t.Errorf("request not stored as sent: %s", streamed["request"])
	}

	// Unlimited: null expiresAt; earlier runs keep theirs.
	mode := cloudapi.RetentionUnlimited
	e.update(d.ID, cloudapi.UpdateDeploymentRequest{RunRetentionMode: &mode})
	e.do("POST", "rec-ep", "/v1/chat/completions", key, chatBody("unlimited run"))
	runs = e.runs(d.ID, 3)
	if len(runs) != 3 || runs[2]["expiresAt"].(*int64) != nil {
		t.Fatalf("unlimited run: %v", runs)
	}
	if exp := runs[0]["expiresAt"].(*int64); exp == nil || *exp != runs[0]["createdAt"].(int64)+3*day {
		t.Errorf("retention change rewrote an earlier run's expiresAt: %v", exp)
	}

	// None: nothing recorded.
	mode = cloudapi.RetentionNone
	e.update(d.ID, cloudapi.UpdateDeploymentRequest{RunRetentionMode: &mode})
	calls := func() (n int64) {
		if err := e.db.QueryRow(`SELECT coalesce(sum(requests), 0) FROM usage_hourly WHERE deployment_id = ?`, d.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := calls()
	e.do("POST", "rec-ep", "/v1/chat/completions", key, chatBody("not recorded"))
	// The call's usage is written in the transaction that would have stored its run.
	poll.Until(t, 5*time.Second, "the usage of the retention-none call", func() bool { return calls() == before+1 })
	if runs = e.runs(d.ID, 3); len(runs) != 3 {
		t.Fatalf("retention none recorded a run: %d runs", len(runs))
	}

	// No credential in any stored run: not the endpoint key, not the upstream key.
	rows, err := e.db.Query(`SELECT request || response || model || coalesce(key_id, '') FROM runs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		rows.Scan(&s)
		if strings.Contains(s, key) || strings.Contains(s, upstreamKey) || strings.Contains(s, key[:20]) {
			t.Fatalf("a stored run holds a secret: %s", s)
		}
	}
}

func TestRunRecordsErrors(t *testing.T) {
	e := newEnv(t)
	d, _ := e.deploy("recerr-ep", multi, cloudapi.AuthNone, cloudapi.RetentionUnlimited, 0)
	e.do("POST", "recerr-ep", "/v1/chat/completions", "", chatBody("hi", "model", "nope"))
	runs := e.runs(d.ID, 1)
	if len(runs) != 1 || runs[0]["status"] != "error" || !strings.Contains(runs[0]["response"].(string), "model_not_found") {
		t.Fatalf("error run: %v", runs)
	}
}

// A failed run says why: the model it was for (the endpoint's own, or the one asked for), the status it
// was answered with, the error's code, and the request as sent, for a call refused by a rate limit
// before its body was read as for one refused for its body.
func TestFailedRunsSayWhy(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("failing", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.limitKey(d.ID, core.RateLimitsChange{RequestsPerMinute: limit(1)})
	if r := e.do("POST", "failing", "/v1/chat/completions", key, chatBody("first")); r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}
	limited := `{"model": "gpt-4o", "messages": [{"role": "user", "content": "one too many"}]}`
	wantError(t, e.do("POST", "failing", "/v1/chat/completions", key, limited), 429, "rate_limit_exceeded")
	e.limitKey(d.ID, core.RateLimitsChange{RequestsPerMinute: core.LimitChange{Set: true}})
	malformed := `{"model": "gpt-4o", "messages": "not a list"}`
	wantError(t, e.do("POST", "failing", "/v1/chat/completions", key, malformed), 400, "")

	runs := e.runs(d.ID, 3)
	if len(runs) != 3 {
		t.Fatalf("%d runs, want 3", len(runs))
	}
	byRequest := map[string]map[string]any{}
	for _, r := range runs {
		byRequest[r["request"].(string)] = r
	}
	for _, c := range []struct {
		request, code string
		status        int64
	}{{limited, "rate_limit_exceeded", 429}, {malformed, "invalid_request", 400}} {
		r, ok := byRequest[c.request]
		if !ok {
			t.Errorf("no run keeps the request as sent: %s (runs: %v)", c.request, runs)
			continue
		}
		// The endpoint pins its model: the run names it, not the one the body asked for.
		if r["status"] != "error" || r["model"] != "sim-echo" || r["statusCode"] != c.status || r["errorCode"] != c.code {
			t.Errorf("run of %s: %v", c.request, r)
		}
		if !strings.Contains(r["response"].(string), `"error"`) {
			t.Errorf("the run's response is not the error answered: %s", r["response"])
		}
	}
	for _, r := range runs {
		if r["status"] == "ok" && (r["statusCode"] != int64(200) || r["errorCode"] != "") {
			t.Errorf("answered run: %v", r)
		}
	}

	// A multi-model endpoint: the model asked for, when it cannot be served.
	mm, mkey := e.deploy("failing-mm", multi, cloudapi.AuthFixedAPIKey, "", 0)
	wantError(t, e.do("POST", "failing-mm", "/v1/chat/completions", mkey, chatBody("hi", "model", "no-such-model")), 404, "model_not_found")
	runs = e.runs(mm.ID, 1)
	if len(runs) != 1 || runs[0]["model"] != "no-such-model" || runs[0]["statusCode"] != int64(404) || runs[0]["errorCode"] != "model_not_found" {
		t.Errorf("multi-model failed run: %v", runs)
	}
}

// A call refused for a wrong or missing key is counted in the endpoint's usage as an error, from the
// headers alone (its body never read), and writes no run row: a flood of wrong keys costs a counter.
func TestRefusedCallsCountInUsage(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("refused", base("sim-echo"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionUnlimited, 0)
	for range 3 {
		wantError(t, e.do("POST", "refused", "/v1/chat/completions", "sk-wrong", chatBody("hi")), 401, "invalid_api_key")
	}
	if r := e.do("POST", "refused", "/v1/chat/completions", key, chatBody("hi")); r.status != 200 {
		t.Fatalf("good call: %d %s", r.status, r.body)
	}
	e.runs(d.ID, 1) // the good call's run, written with the refused calls' counts
	deadline := time.Now().Add(5 * time.Second)
	var requests, errs int64
	for time.Now().Before(deadline) {
		if err := e.db.QueryRow(`SELECT coalesce(sum(requests), 0), coalesce(sum(errors), 0) FROM usage_hourly WHERE deployment_id = ?`, d.ID).Scan(&requests, &errs); err != nil {
			t.Fatal(err)
		}
		if requests == 4 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if requests != 4 || errs != 3 {
		t.Fatalf("usage counts %d calls, %d errors; want 4 calls, 3 errors", requests, errs)
	}
	var r401, r404, r429 int64
	if err := e.db.QueryRow(`SELECT sum(refused_401), sum(refused_404), sum(refused_429) FROM usage_hourly WHERE deployment_id = ?`, d.ID).Scan(&r401, &r404, &r429); err != nil {
		t.Fatal(err)
	}
	if r401 != 3 || r404 != 0 || r429 != 0 {
		t.Fatalf("refused by status: 401 %d, 404 %d, 429 %d; want 3 of 401", r401, r404, r429)
	}
	if runs := e.runs(d.ID, 1); len(runs) != 1 || runs[0]["status"] != "ok" {
		t.Fatalf("refused calls wrote run rows: %v", runs)
	}
}

// A call to a disabled endpoint is answered 404 as for an unknown slug, and counted in that endpoint's
// usage as an error refused with 404, under its key where the key presented is one of the endpoint's: an operator sees
// who still calls it. An unknown slug has no endpoint to count against; no refused call writes a run.
func TestDisabledEndpointCallsCountInUsage(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("dormant", base("sim-echo"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionUnlimited, 0)
	if r := e.do("POST", "dormant", "/v1/chat/completions", key, chatBody("hi")); r.status != 200 {
		t.Fatalf("good call: %d %s", r.status, r.body)
	}
	off := false
	e.update(d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &off})
	for range 2 {
		wantError(t, e.do("POST", "dormant", "/v1/chat/completions", key, chatBody("hi")), 404, "not_found")
	}
	wantError(t, e.do("POST", "dormant", "/v1/chat/completions", "sk-wrong", chatBody("hi")), 404, "not_found")
	wantError(t, e.do("POST", "no-such-slug", "/v1/chat/completions", key, chatBody("hi")), 404, "not_found")
	e.runs(d.ID, 1) // the good call's run, written with the refused calls' counts

	type row struct{ requests, errs, refused404 int64 }
	read := func() map[string]row {
		rows, err := e.db.Query(`SELECT key_id, sum(requests), sum(errors), sum(refused_404) FROM usage_hourly WHERE deployment_id = ? GROUP BY key_id`, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		got := map[string]row{}
		for rows.Next() {
			var k string
			var r row
			if err := rows.Scan(&k, &r.requests, &r.errs, &r.refused404); err != nil {
				t.Fatal(err)
			}
			got[k] = r
		}
		return got
	}
	var keyID string
	if err := e.db.QueryRow(`SELECT id FROM api_keys WHERE deployment_id = ?`, d.ID).Scan(&keyID); err != nil {
		t.Fatal(err)
	}
	want := map[string]row{keyID: {3, 2, 2}, "": {1, 1, 1}}
	var got map[string]row
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = read(); fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("usage by key %v; want %v (the key's call and its two 404s, the wrong key's 404 without a key)", got, want)
	}
	if runs := e.runs(d.ID, 1); len(runs) != 1 || runs[0]["status"] != "ok" {
		t.Fatalf("refused calls wrote run rows: %v", runs)
	}
	// The disabled endpoint is cached as such; enabling it again serves at once.
	on := true
	e.update(d.ID, cloudapi.UpdateDeploymentRequest{Enabled: &on})
	if r := e.do("POST", "dormant", "/v1/chat/completions", key, chatBody("hi")); r.status != 200 {
		t.Fatalf("enabled again: %d %s", r.status, r.body)
	}
}
