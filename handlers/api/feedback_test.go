package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
)

// PUT .../runs/{runId}/feedback: the body read strictly (score required, -1 to 1; a comment of at most
// 2,000 characters), another project's run 404; GET .../runs/export refuses bad and unknown
// parameters before any line and is never gzip-compressed, its counts in trailers.
func TestFeedbackAndExportRoutes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	alice, mallory := e.user(), e.user()
	d := must(alice.CreateDeployment(ctx, base("scored")))
	now := time.Now().UnixMilli()
	_, err := e.sqldb.Exec(`INSERT INTO runs (id, deployment_id, model, status, latency_ms, prompt_tokens, completion_tokens, created_at, request, response)
		VALUES ('run_0000000000000api', ?, 'base-a', 'ok', 1, 1, 1, ?, ?, ?)`, d.ID, now,
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"id":"chatcmpl-0000000000000api","object":"chat.completion","created":1,"model":"base-a","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	run := must(alice.SetRunFeedback(ctx, d.ID, "run_0000000000000api", cloudapi.SetRunFeedbackRequest{Score: 1, Comment: "fine"}))
	if run.Feedback == nil || run.Feedback.Score != 1 || run.Feedback.Comment != "fine" || run.Feedback.At.IsZero() {
		t.Fatalf("feedback %+v", run.Feedback)
	}
	_, err = mallory.SetRunFeedback(ctx, d.ID, "run_0000000000000api", cloudapi.SetRunFeedbackRequest{Score: -1})
	wantErr(t, err, 404, "not_found")
	_, err = alice.SetRunFeedback(ctx, d.ID, "run_0000000000000api", cloudapi.SetRunFeedbackRequest{Score: 3})
	wantErr(t, err, 400, "invalid_request")
	_, err = alice.SetRunFeedback(ctx, d.ID, "run_0000000000000nothere", cloudapi.SetRunFeedbackRequest{Score: 1})
	wantErr(t, err, 404, "not_found")

	// DELETE .../feedback clears it (and clearing none is the same answer); another project's run is 404.
	_, err = mallory.ClearRunFeedback(ctx, d.ID, "run_0000000000000api")
	wantErr(t, err, 404, "not_found")
	for range 2 {
		if run := must(alice.ClearRunFeedback(ctx, d.ID, "run_0000000000000api")); run.Feedback != nil {
			t.Fatalf("cleared feedback %+v", run.Feedback)
		}
	}
	_, err = alice.ClearRunFeedback(ctx, d.ID, "run_0000000000000nothere")
	wantErr(t, err, 404, "not_found")
	must(alice.SetRunFeedback(ctx, d.ID, "run_0000000000000api", cloudapi.SetRunFeedbackRequest{Score: 1, Comment: "fine"}))

	put := func(body string) int {
		p := e.url + "/v1/orgs/" + alice.OrgSlug + "/projects/" + alice.ProjectSlug + "/deployments/" + d.ID + "/runs/run_0000000000000api/feedback"
		req, _ := http.NewRequest(http.MethodPut, p, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+alice.Token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, body := range []string{`{}`, `{"score": 1, "comment": "half a pair \ud800 here"}`, `{"score": 1, "comment": "\udc00"}`, `{"score": 1, "stars": 5}`, `{"score": "1"}`, `{"score": null}`, `{"score": 1, "comment": "` + string(bytes.Repeat([]byte("x"), 2001)) + `"}`} {
		if st := put(body); st != 400 {
			t.Errorf("%.40s: %d, want 400", body, st)
		}
	}

	// The export's answer: JSONL, uncompressed, with its counts in trailers.
	p := e.url + "/v1/orgs/" + alice.OrgSlug + "/projects/" + alice.ProjectSlug + "/deployments/" + d.ID + "/runs/export?minScore=1"
	req, _ := http.NewRequest(http.MethodGet, p, nil)
	req.Header.Set("Authorization", "Bearer "+alice.Token)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Content-Type") != "application/jsonl; charset=utf-8" ||
		!bytes.Contains(body, []byte(`"content":"hello"`)) || resp.Trailer.Get(cloudapi.ExportWrittenTrailer) != "1" {
		t.Fatalf("export: %d %v %s trailers %v", resp.StatusCode, resp.Header, body, resp.Trailer)
	}
	for _, q := range []string{"format=csv", "since=yesterday", "minScore=2", "reasoning=yes", "limit=5", "status=failed", "arm=b"} {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/v1/orgs/"+alice.OrgSlug+"/projects/"+alice.ProjectSlug+"/deployments/"+d.ID+"/runs/export?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+alice.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", q, resp.StatusCode)
		}
	}
	_, err = mallory.ExportRuns(ctx, d.ID, cloudapi.ExportOptions{})
	wantErr(t, err, 404, "not_found")
}
