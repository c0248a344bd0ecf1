package edge_test

import (
	"fmt"
	"testing"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
)

// A split canary keeps a Responses chain on its arm when both arms pass Responses through to an
// upstream that serves the API: a later turn's previous_response_id is then the upstream's id, which
// the edge reads back to the chain's first request (from what it answered lately, or the store by the
// run's upstreamResponseId), as it reads svc's own ids. Turns follow at once, plain and streamed.
func TestSplitCanaryKeepsAPassedThroughChainOnItsArm(t *testing.T) {
	e := newEnvWith(t, envOptions{models: `  - name: up-responses-b
    runtime: openai
    upstreamUrl: %[1]s/v1
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
    supportsResponses: true
`})
	d, key := e.deploy("split-pass", base("up-responses"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	e.setCanary(d.ID, "up-responses-b", 30, edgemodel.CanarySplit)

	const sessions, turns = 60, 3
	onCanary := 0
	for i := range sessions {
		stream := i%2 == 1
		var arms []string
		previous := ""
		for turn := range turns {
			body := map[string]any{"input": fmt.Sprintf("passed chain %d turn %d", i, turn), "stream": stream}
			if previous != "" {
				body["previous_response_id"] = previous
			}
			done := responseOf(t, e.do("POST", "split-pass", "/v1/responses", key, body), stream)
			model, _ := done["model"].(string)
			arms = append(arms, model)
			previous, _ = done["id"].(string)
			if previous == "" || previous[:9] != "resp_mock" {
				t.Fatalf("session %d turn %d: the response id %q is not the upstream's (not passed through)", i, turn, previous)
			}
		}
		for _, a := range arms[1:] {
			if a != arms[0] {
				t.Fatalf("session %d (stream %v) changed arm across its turns: %q", i, stream, arms)
			}
		}
		switch arms[0] {
		case "up-responses-b":
			onCanary++
		case "up-responses":
		default:
			t.Fatalf("session %d answered by %q", i, arms[0])
		}
	}
	// 30% of 60 sessions: 18, with a standard deviation of 3.5.
	if onCanary < 8 || onCanary > 28 {
		t.Fatalf("%d of %d sessions on a 30%% canary", onCanary, sessions)
	}
	t.Logf("%d of %d passed-through chains on the 30%% canary", onCanary, sessions)
	for _, r := range e.armRuns(d.ID, sessions*turns) {
		want := map[string]string{"up-responses": edgemodel.ArmPrimary, "up-responses-b": edgemodel.ArmCanary}[r.model]
		if r.arm != want || r.armTarget != r.model {
			t.Fatalf("run %s answered by %s records arm %q target %q", r.id, r.model, r.arm, r.armTarget)
		}
	}
}
