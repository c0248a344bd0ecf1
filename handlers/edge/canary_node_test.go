package edge_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
)

// TestCanaryNodeSDKs runs tests/node/canary with the real openai and @anthropic-ai/sdk packages: 200
// sessions on a 30% split canary, and calls to a shadow canary; then checks what the runs recorded.
func TestCanaryNodeSDKs(t *testing.T) {
	root := repoRoot(t)
	node, err := exec.LookPath("node")
	if err != nil {
		missingTestDeps(t, "node is not installed (the SDK tests need Node 20)")
	}
	for _, pkg := range []string{"openai", "@anthropic-ai/sdk"} {
		if _, err := os.Stat(filepath.Join(root, "node_modules", pkg, "package.json")); err != nil {
			missingTestDeps(t, "node_modules/"+pkg+" is missing")
		}
	}
	e := newEnv(t)
	split, key := e.deploy("node-split", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(split.ID, "sim-think", 30, edgemodel.CanarySplit)
	shadow, shadowKey := e.deploy("node-shadow", base("sim-echo"), cloudapi.AuthFixedAPIKey, "", 0)
	e.setCanary(shadow.ID, "sim-think", 1, edgemodel.CanaryShadow)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := func(file string, env ...string) string {
		cmd := exec.CommandContext(ctx, node, "--test", file)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), append([]string{"SVC_EDGE_BASE=http://" + e.srv.Addr.String(),
			"SVC_CANARY_PRIMARY=sim-echo", "SVC_CANARY_MODEL=sim-think"}, env...)...)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "# fail 0") {
			t.Fatalf("node --test %s: %v\n%s", file, err, out)
		}
		return string(out)
	}
	out := run("tests/node/canary/split.canary.mjs", "SVC_SPLIT_SLUG=node-split", "SVC_SPLIT_KEY="+key,
		"SVC_SHADOW_SLUG=node-shadow", "SVC_SHADOW_KEY="+shadowKey)
	t.Logf("%s", out)

	// Every turn's run records the arm that answered it, under its target.
	for _, r := range e.armRuns(split.ID, 600) {
		if want := map[string]string{"sim-echo": edgemodel.ArmPrimary, "sim-think": edgemodel.ArmCanary}[r.model]; r.arm != want || r.armTarget != r.model {
			t.Fatalf("split run %s answered by %s records arm %q target %q", r.id, r.model, r.arm, r.armTarget)
		}
	}
	// Each shadowed call's copy was answered by the canary and recorded beside it, paired.
	runs := e.armRuns(shadow.ID, 40)
	primary, paired := map[string]bool{}, 0
	for _, r := range runs {
		if r.arm == edgemodel.ArmPrimary && r.model == "sim-echo" {
			primary[r.id] = true
		}
	}
	for _, r := range runs {
		if r.arm == edgemodel.ArmCanary && r.model == "sim-think" && primary[r.shadowOf] {
			paired++
		}
	}
	if len(runs) != 40 || len(primary) != 20 || paired != 20 {
		t.Fatalf("shadow deployment: %d runs, %d primary, %d paired shadow runs; want 40, 20, 20", len(runs), len(primary), paired)
	}
}
