package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/edgeproc"
	"github.com/svcdev/svc/internal/runs"
)

// Feedback sent to an svc edge process with the id its answer carried reaches the control plane (POST
// feedback of the internal API) and is kept with the run, once the edge shipped it: sent at once, the
// feedback waits for the run. Another endpoint's id is the same 404 as on svc server; with its control
// plane down, the edge answers 503.
func TestFeedbackThroughAnEdgeProcess(t *testing.T) {
	c := newCluster(t)
	e := c.edge("", nil)
	d, key := c.deploy("scored", "")
	_, otherKey := c.deploy("other", "")
	a := call(t, e, "scored", key, "rate this")
	var ans struct{ ID string }
	if a.status != 200 || json.Unmarshal([]byte(a.body), &ans) != nil || !strings.HasPrefix(ans.ID, "chatcmpl-") {
		t.Fatalf("call: %d %s", a.status, a.body)
	}
	if st, body := feedbackOn(t, e, "scored", key, ans.ID, -1); st != 200 {
		t.Fatalf("feedback: %d %s", st, body)
	}
	runID, _ := runs.IDOf(ans.ID)
	run, err := c.sdk.GetRun(context.Background(), d.ID, runID)
	if err != nil || run.Feedback == nil || run.Feedback.Score != -1 {
		t.Fatalf("run %s: %+v %v", runID, run, err)
	}
	st, foreign := feedbackOn(t, e, "other", otherKey, ans.ID, 1)
	stUnknown, unknown := feedbackOn(t, e, "scored", key, "chatcmpl-0000000000000none", 1)
	if st != 404 || stUnknown != 404 || foreign != unknown {
		t.Errorf("another endpoint's run: %d %s; an unknown one: %d %s", st, foreign, stUnknown, unknown)
	}
	c.stopCP()
	if st, body := feedbackOn(t, e, "scored", key, ans.ID, 1); st != 503 {
		t.Errorf("control plane down: %d %s", st, body)
	}
	c.startCP()
}

// feedbackOn posts feedback to slug on edge e.
func feedbackOn(t *testing.T, e *edgeproc.Edge, slug, key, id string, score int) (int, string) {
	t.Helper()
	addr := e.Addr.String()
	client := edgeClient(addr)
	body, _ := json.Marshal(map[string]any{"id": id, "score": score})
	req, _ := http.NewRequest("POST", "http://"+slug+"."+edgeDomain+"/v1/feedback", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
