package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playwright-community/playwright-go"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
	"github.com/svcdev/svc/internal/server"
)

// fakeReplicaEnv, when set, makes the test binary a fake vLLM replica on a free loopback port (TestMain
// calls serveFakeReplica): a process of its own, which a journey can SIGKILL.
const fakeReplicaEnv = "SVC_E2E_FAKE_VLLM"

// serveFakeReplica serves internal/mockupstream's Engine on a free loopback port and prints its address.
func serveFakeReplica() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("replica listening on", ln.Addr())
	srv := &http.Server{Handler: mockupstream.NewEngine(mockupstream.EngineConfig{Model: "fake-model", PrefillTime: time.Microsecond,
		ITL: time.Millisecond, Tokens: 4}), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, srv.Serve(ln))
	os.Exit(1)
}

// startReplica starts a fake vLLM replica process and returns it with its address, once it listens.
func startReplica(t *testing.T) (*exec.Cmd, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), fakeReplicaEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "replica listening on ")
	if err != nil || !ok {
		t.Fatalf("the replica did not start: %q %v", line, err)
	}
	go io.Copy(io.Discard, out)
	return cmd, addr
}

// The Fleet view, at 1280 and 390 px: a model served by two fake vLLM replicas (processes on
// loopback) shows both healthy; one SIGKILLed shows as out, saying why, within seconds, with no call
// sent to it; the runs list names the replica that answered each run.
func TestFleetViewShowsAKilledReplicaOut(t *testing.T) {
	for _, w := range journeyWidths {
		t.Run(fmt.Sprintf("%dpx", w), func(t *testing.T) {
			var procs []*exec.Cmd
			var addrs []string
			for range 2 {
				p, a := startReplica(t)
				procs, addrs = append(procs, p), append(addrs, a)
			}
			models := filepath.Join(t.TempDir(), "models.yaml")
			if err := os.WriteFile(models, []byte(fmt.Sprintf(`models:
  - name: fleet
    runtime: openai
    upstreamModel: fake-model
    public: true
    default: true
    replicas: [http://%s/v1, http://%s/v1]
    routing: affinity
`, addrs[0], addrs[1])), 0o600); err != nil {
				t.Fatal(err)
			}
			e := newEnvServing(t, nil, func(c *server.Config) { c.ModelsFile = models })
			e.width = w
			e.must(e.page.SetViewportSize(w, 900))
			fleetJourney(t, e, procs, addrs)
		})
	}
}

func fleetJourney(t *testing.T, e *env, procs []*exec.Cmd, addrs []string) {
	ctx := context.Background()
	cl, err := e.local.ScopedClient(ctx)
	e.must(err)
	d, err := cl.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "fleet-view", AuthMode: cloudapi.AuthNone,
		Target: cloudapi.Target{Kind: cloudapi.TargetBaseModel, Model: "fleet"}})
	e.must(err)
	resp, err := http.Post(e.api.BaseURL+"/e/fleet-view/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"which replica?"}]}`))
	e.must(err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("edge call: HTTP %d", resp.StatusCode)
	}
	e.api.Flush()

	// The runs list names the replica that answered.
	e.open("#/endpoints/" + d.ID + "/runs")
	cell := e.testid("run-replica-cell")
	e.must(expect.Locator(cell).ToBeVisible())
	answered, err := cell.TextContent()
	e.must(err)
	if !slices.Contains(addrs, answered) {
		t.Fatalf("the run names replica %q, not one of %v", answered, addrs)
	}
	e.snap("runs-replica")
	// The overview's glance keeps its time, prompt, model and status, without the replica.
	e.section("overview")
	e.must(expect.Locator(e.page.Locator("#runs [data-testid=run-status]").First()).ToBeVisible())
	e.must(expect.Locator(e.page.Locator("#runs td.run-replica").First()).ToBeHidden())

	// The Fleet view, by the top bar's link: both replicas healthy.
	e.must(e.testid("nav-fleet").Click())
	model := e.page.Locator(`[data-testid="fleet-model"][data-model="fleet"]`)
	e.must(expect.Locator(model.GetByTestId("fleet-healthy")).ToHaveText("2 of 2 healthy"))
	for _, a := range addrs {
		e.must(expect.Locator(e.page.Locator(`[data-testid="fleet-replica"][data-addr="`+a+`"]`)).ToHaveAttribute("data-state", "healthy"))
	}
	e.must(expect.Locator(model.GetByTestId("fleet-routing")).ToContainText("Routing affinity"))
	e.snap("fleet-healthy")

	// SIGKILL one: the view, polling, shows it out with why within seconds.
	killed := addrs[1]
	killedAt := time.Now()
	e.must(procs[1].Process.Signal(syscall.SIGKILL))
	procs[1].Wait()
	row := e.page.Locator(`[data-testid="fleet-replica"][data-addr="` + killed + `"]`)
	e.must(expect.Locator(row).ToHaveAttribute("data-state", "out", playwright.LocatorAssertionsToHaveAttributeOptions{Timeout: playwright.Float(6000)}))
	t.Logf("%s shown out %v after its SIGKILL", killed, time.Since(killedAt).Round(time.Millisecond))
	e.must(expect.Locator(row.GetByTestId("fleet-why")).ToContainText("connection refused"))
	e.must(expect.Locator(model.GetByTestId("fleet-healthy")).ToHaveText("1 of 2 healthy"))
	e.must(expect.Locator(e.page.Locator(`[data-testid="fleet-replica"][data-addr="`+addrs[0]+`"]`)).ToHaveAttribute("data-state", "healthy"))
	e.snap("fleet-out")
}
