package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestModelsGetShowsAKilledReplicaOut: `svc models get` prints a fleet model's replicas, and a replica
// whose process is SIGKILLed shows as out, with why, within two seconds, though no call is sent (the
// scrape finds its port closed); a model without replicas says so.
func TestModelsGetShowsAKilledReplicaOut(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	var addrs, urls []string
	var replicas []*exec.Cmd
	for range 3 {
		addr := freeAddr(t)
		replicas = append(replicas, startReplica(t, addr))
		addrs, urls = append(addrs, addr), append(urls, "http://"+addr+"/v1")
	}
	models := filepath.Join(home, "models.yaml")
	if err := os.WriteFile(models, []byte("models:\n  - name: fleet\n    runtime: openai\n    upstreamModel: fake-model\n    public: true\n    replicas: ["+
		strings.Join(urls, ", ")+"]\n    lora: vllm\n    maxLoras: 2\n  - name: single\n    runtime: openai\n    upstreamModel: fake-model\n    upstreamUrl: "+urls[0]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := svcEnv(home)
	_, base := startProcess(t, dir, env, apiLine, "server", "--addr", "127.0.0.1:0", "--data", filepath.Join(home, "data"), "--models", models)
	api := "--api=" + base
	if r := runSvc(t, dir, env, "login", "--anonymous", api); r.code != 0 {
		t.Fatalf("login: %s", r.stderr)
	}

	r := runSvc(t, dir, env, "models", "get", "fleet", api)
	if r.code != 0 {
		t.Fatalf("models get: %d %s", r.code, r.stderr)
	}
	t.Logf("svc models get fleet:\n%s", r.stdout)
	if !strings.Contains(r.stdout, "replicas: 3, routing affinity, cache signal routed, 2 LoRA slots each") {
		t.Errorf("no fleet line in:\n%s", r.stdout)
	}
	for _, a := range addrs {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(a) + `\s+healthy\s+0\s`).MatchString(r.stdout) {
			t.Errorf("replica %s is not a healthy row of:\n%s", a, r.stdout)
		}
	}

	// svc runs list names the replica that answered a run.
	if r := runSvc(t, dir, env, "deployments", "create", "--slug", "fv", "--target", "base:fleet", "--auth", "none", api); r.code != 0 {
		t.Fatalf("deployments create: %s", r.stderr)
	}
	resp, err := http.Post(base+"/e/fv/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	row := regexp.MustCompile(`(?m)^run_\S+\s+ok\s+-\s+chat\s+fleet\s+(\S+)\s+\d+ ms`)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r = runSvc(t, dir, env, "runs", "list", "fv", api)
		if m := row.FindStringSubmatch(r.stdout); m != nil {
			if !slices.Contains(addrs, m[1]) {
				t.Errorf("the run names replica %q, not one of %v:\n%s", m[1], addrs, r.stdout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run with its replica in:\n%s%s", r.stdout, r.stderr)
		}
	}

	killed := addrs[1]
	killedAt := time.Now()
	replicas[1].Process.Signal(syscall.SIGKILL)
	replicas[1].Wait()
	out := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(killed) + `\s+out: connection refused \(its /metrics\)\s+0\s+0\s+1\s`)
	for {
		r = runSvc(t, dir, env, "models", "get", "fleet", api)
		if out.MatchString(r.stdout) {
			break
		}
		if time.Since(killedAt) > 2*time.Second {
			t.Fatalf("%s not out %v after its SIGKILL:\n%s%s", killed, time.Since(killedAt), r.stdout, r.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%s out %v after its SIGKILL:\n%s", killed, time.Since(killedAt).Round(time.Millisecond), r.stdout)

	if r = runSvc(t, dir, env, "models", "get", "fleet", "--json", api); !strings.Contains(r.stdout, `"state": "out"`) || !strings.Contains(r.stdout, `"outReason": "connection refused (its /metrics)"`) {
		t.Errorf("--json:\n%s", r.stdout)
	}
	if r = runSvc(t, dir, env, "models", "get", "single", api); r.code != 0 || !strings.Contains(r.stdout, "replicas: none (one upstream)") {
		t.Errorf("a model with one upstream: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r = runSvc(t, dir, env, "models", "get", "nope", api); r.code == 0 || !strings.Contains(r.stderr, `no model "nope"`) {
		t.Errorf("an unknown model: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
