package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
)

// A run of a model served by replicas names the replica (host:port) that answered it, in the
// management API's run and its listing; a run of a model with one upstream names none.
func TestRunsNameTheReplicaThatAnswered(t *testing.T) {
	e := newEnvWith(t, envOptions{models: `  - name: up-fleet
    runtime: openai
    replicas: [%[1]s/v1]
    upstreamModel: mock-model
    apiKeyEnv: SVC_TEST_UPSTREAM_KEY
`})
	fleet, key := e.deploy("fleet-runs", base("up-fleet"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	single, key2 := e.deploy("single-runs", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	for _, stream := range []bool{false, true} {
		if r := e.do("POST", "fleet-runs", "/v1/chat/completions", key, chatBody("Hello", "stream", stream)); r.status != 200 {
			t.Fatalf("fleet call: %d %s", r.status, r.body)
		}
	}
	if r := e.do("POST", "single-runs", "/v1/chat/completions", key2, chatBody("Hello")); r.status != 200 {
		t.Fatalf("single call: %d %s", r.status, r.body)
	}
	e.srv.Flush()
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	want := strings.TrimPrefix(e.mockURL, "http://")
	page, err := api.ListRuns(ctx, fleet.ID, cloudapi.ListRunsOptions{})
	if err != nil || len(page.Runs) != 2 {
		t.Fatalf("fleet runs: %+v %v", page, err)
	}
	for _, r := range page.Runs {
		if r.Replica != want {
			t.Errorf("run %s names replica %q, want %q", r.ID, r.Replica, want)
		}
	}
	run, err := api.GetRun(ctx, fleet.ID, page.Runs[0].ID)
	if err != nil || run.Replica != want {
		t.Fatalf("GET run: replica %q (%v), want %q", run.Replica, err, want)
	}
	page, err = api.ListRuns(ctx, single.ID, cloudapi.ListRunsOptions{})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].Replica != "" {
		t.Fatalf("a run of a model with one upstream: %+v %v", page, err)
	}

	// The metrics name the replica too: healthy, nothing in flight, and the two calls picked.
	resp, err := http.Get(e.srv.BaseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	labels := `{model="up-fleet",replica="` + want + `"}`
	for _, line := range []string{"svc_fleet_replica_healthy" + labels + " 1", "svc_fleet_replica_in_flight" + labels + " 0",
		"svc_fleet_replica_ejections_total" + labels + " 0", "svc_fleet_held_total" + labels + " 0", "svc_fleet_held_seconds_total" + labels + " 0"} {
		if !strings.Contains(string(text), line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	picks := 0.0
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(l, `svc_fleet_picks_total{model="up-fleet",reason=`) && strings.Contains(l, `replica="`+want+`"`) {
			var v float64
			fmt.Sscan(l[strings.LastIndexByte(l, ' ')+1:], &v)
			picks += v
		}
	}
	if picks != 2 {
		t.Errorf("svc_fleet_picks_total of the replica sums to %v, want the 2 calls", picks)
	}
}

// A call whose replica failed before answering goes once to another, and its run says so: retriedFrom
// names the replica that failed, replica the one that answered; a call that was not retried names
// none. Both the management API's listing and its run carry it.
func TestRunsNameTheReplicaARetryLeft(t *testing.T) {
	var fakes []*mockupstream.Engine
	var urls []string
	for range 2 {
		f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", PrefillTime: time.Nanosecond})
		s := httptest.NewServer(f)
		t.Cleanup(s.Close)
		fakes, urls = append(fakes, f), append(urls, s.URL+"/v1")
	}
	e := newEnvWith(t, envOptions{models: `  - name: retry-fleet
    runtime: openai
    replicas: [` + strings.Join(urls, ", ") + `]
    upstreamModel: fake-model
`})
	d, _ := e.deploy("retry-runs", base("retry-fleet"), cloudapi.AuthNone, cloudapi.RetentionDays, 7)
	body := chatBody(strings.Repeat("The same long prompt, for affinity. ", 40))
	if r := e.do("POST", "retry-runs", "/v1/chat/completions", "", body); r.status != 200 {
		t.Fatalf("first call: %d %s", r.status, r.body)
	}
	// The same prompt goes back to the replica that answered it (affinity): that one now fails with a
	// 5xx before any byte, and the call is answered by the other.
	first := 0
	if fakes[1].Requests.Load() == 1 {
		first = 1
	}
	fakes[first].FailStatus.Store(http.StatusInternalServerError)
	if r := e.do("POST", "retry-runs", "/v1/chat/completions", "", body); r.status != 200 {
		t.Fatalf("retried call: %d %s", r.status, r.body)
	}
	// Now the other fails too, while the first is still out: the call has no replica to go to, and its
	// run names the replica that failed and no retry.
	fakes[1-first].FailStatus.Store(http.StatusInternalServerError)
	if r := e.do("POST", "retry-runs", "/v1/chat/completions", "", body); r.status != http.StatusServiceUnavailable {
		t.Fatalf("call with no replica left: %d %s", r.status, r.body)
	}
	e.srv.Flush()
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	page, err := api.ListRuns(ctx, d.ID, cloudapi.ListRunsOptions{})
	if err != nil || len(page.Runs) != 3 {
		t.Fatalf("runs: %+v %v", page, err)
	}
	failed, other := strings.TrimPrefix(strings.TrimSuffix(urls[first], "/v1"), "http://"), strings.TrimPrefix(strings.TrimSuffix(urls[1-first], "/v1"), "http://")
	if last := page.Runs[0]; last.RetriedFrom != "" || last.Replica != other || last.Status != "error" {
		t.Errorf("the call no replica could take: replica %q retriedFrom %q status %s, want %q, no retry, an error", last.Replica, last.RetriedFrom, last.Status, other)
	}
	retried, plain := page.Runs[1], page.Runs[2] // newest first
	if retried.RetriedFrom != failed || retried.Replica != other || retried.Status != "ok" {
		t.Errorf("the retried run: replica %q retriedFrom %q status %s, want %q after %q", retried.Replica, retried.RetriedFrom, retried.Status, other, failed)
	}
	if plain.RetriedFrom != "" || plain.Replica != failed {
		t.Errorf("the first run: replica %q retriedFrom %q, want %q and none", plain.Replica, plain.RetriedFrom, failed)
	}
	run, err := api.GetRun(ctx, d.ID, retried.ID)
	if err != nil || run.RetriedFrom != failed {
		t.Fatalf("GET run: retriedFrom %q (%v), want %q", run.RetriedFrom, err, failed)
	}
}

// A call retried on another replica still says which canary arm answered it: a split canary's primary
// call, and a shadow canary's copy (paired with the primary's run), each retried after its replica
// failed before answering, record their arm and target beside the replicas.
func TestRetriedRunsKeepTheirArm(t *testing.T) {
	// Two fleets of two replicas each, so that the replica one case ejects is not the other's.
	type replica struct {
		fake *mockupstream.Engine
		host string
	}
	fleets := map[string][]replica{}
	models := ""
	for _, name := range []string{"split-fleet", "shadow-fleet"} {
		var urls []string
		for range 2 {
			f := mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", PrefillTime: time.Nanosecond})
			s := httptest.NewServer(f)
			t.Cleanup(s.Close)
			fleets[name] = append(fleets[name], replica{f, strings.TrimPrefix(s.URL, "http://")})
			urls = append(urls, s.URL+"/v1")
		}
		models += "  - name: " + name + "\n    runtime: openai\n    replicas: [" + strings.Join(urls, ", ") + "]\n    upstreamModel: fake-model\n"
	}
	e := newEnvWith(t, envOptions{models: models})
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	// served sends the same prompt twice to the deployment; the fleet's replica that took the first
	// call (affinity sends the second there too) fails before the second, with a 5xx before any byte.
	// It returns the deployment's n runs, newest first, and the replica that failed.
	served := func(slug, deploymentID, fleet string, n int) ([]cloudapi.RunSummary, string) {
		t.Helper()
		body := chatBody(strings.Repeat("The same long prompt, for affinity. ", 40))
		if r := e.do("POST", slug, "/v1/chat/completions", "", body); r.status != 200 {
			t.Fatalf("%s: first call: %d %s", slug, r.status, r.body)
		}
		deadline := time.Now().Add(5 * time.Second) // a shadow copy is served after the answer
		for fleets[fleet][0].fake.Requests.Load()+fleets[fleet][1].fake.Requests.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no replica of %s took the first call", slug, fleet)
			}
			time.Sleep(10 * time.Millisecond)
		}
		first := fleets[fleet][0]
		if first.fake.Requests.Load() == 0 {
			first = fleets[fleet][1]
		}
		first.fake.FailStatus.Store(http.StatusInternalServerError)
		if r := e.do("POST", slug, "/v1/chat/completions", "", body); r.status != 200 {
			t.Fatalf("%s: retried call: %d %s", slug, r.status, r.body)
		}
		deadline = time.Now().Add(10 * time.Second)
		for {
			e.srv.Flush()
			page, err := api.ListRuns(context.Background(), deploymentID, cloudapi.ListRunsOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Runs) >= n || time.Now().After(deadline) {
				if len(page.Runs) != n {
					t.Fatalf("%s: %d runs, want %d", slug, len(page.Runs), n)
				}
				return page.Runs, first.host
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	// A split canary of 1% on sim-echo: this prompt's session is the primary's, served by the fleet.
	split, _ := e.deploy("retry-split", base("split-fleet"), cloudapi.AuthNone, cloudapi.RetentionDays, 7)
	e.setCanary(split.ID, "sim-echo", 1, edgemodel.CanarySplit)
	runs, failed := served("retry-split", split.ID, "split-fleet", 2)
	retried := runs[0]
	if retried.Status != "ok" || retried.RetriedFrom != failed || retried.Replica == failed || retried.Arm != edgemodel.ArmPrimary || retried.ArmTarget != "split-fleet" {
		t.Errorf("the retried primary run: %s, replica %q retriedFrom %q arm %q target %q; want ok, retried from %q, on the primary split-fleet",
			retried.Status, retried.Replica, retried.RetriedFrom, retried.Arm, retried.ArmTarget, failed)
	}

	// The other fleet as a shadow canary: the second call's copy is retried.
	shadow, _ := e.deploy("retry-shadow", base("sim-echo"), cloudapi.AuthNone, cloudapi.RetentionDays, 7)
	e.setCanary(shadow.ID, "shadow-fleet", 10, edgemodel.CanaryShadow)
	runs, failed = served("retry-shadow", shadow.ID, "shadow-fleet", 4)
	primary := map[string]bool{}
	for _, r := range runs {
		if r.Arm == edgemodel.ArmPrimary {
			primary[r.ID] = true
		}
	}
	copies := 0
	for _, r := range runs {
		if r.Arm != edgemodel.ArmCanary {
			continue
		}
		if r.Status != "ok" || r.ArmTarget != "shadow-fleet" || !primary[r.ShadowOf] {
			t.Errorf("shadow run %s: %s, target %q, shadowOf %q; want ok, shadow-fleet, paired with a primary run", r.ID, r.Status, r.ArmTarget, r.ShadowOf)
		}
		if r.RetriedFrom != "" {
			copies++
			if r.RetriedFrom != failed || r.Replica == failed {
				t.Errorf("the retried copy: replica %q retriedFrom %q, want retried from %q", r.Replica, r.RetriedFrom, failed)
			}
		}
	}
	if len(primary) != 2 || copies != 1 {
		t.Errorf("%d primary runs, %d retried copies; want 2 and 1", len(primary), copies)
	}
}
