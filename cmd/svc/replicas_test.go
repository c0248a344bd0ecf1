package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/db/storetest"
)

// spawn starts the svc binary without waiting for it (waitReady does).
func spawn(t *testing.T, dir string, env []string, args ...string) *devProcess {
	t.Helper()
	cmd := exec.Command(svcBin, args...)
	cmd.Dir, cmd.Env = dir, env
	p := &devProcess{cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitReady waits until the process's stdout matches ready and returns the first submatch.
func (p *devProcess) waitReady(t *testing.T, ready *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if m := ready.FindStringSubmatch(p.stdout.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-p.done:
			t.Fatalf("svc %s exited early (%v)\nstdout:\n%s\nstderr:\n%s", p.cmd.Args[1], err, p.stdout.String(), p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc %s did not start:\n%s\nstderr:\n%s", p.cmd.Args[1], p.stdout.String(), p.stderr.String())
		}
	}
}

// leads reads svc_leader from a replica's /metrics (false when it does not answer).
func leads(api string) bool {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(api + "/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return regexp.MustCompile(`(?m)^svc_leader 1$`).Match(b)
}

// edgeCaller sends chat completions to slug through the edge listening on addr.
func edgeCaller(addr string) func(slug, key string) (int, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	return func(slug, key string) (int, error) {
		req, _ := http.NewRequest("POST", "http://"+slug+".edge.test/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
}

// TestReplicasOnPostgreSQL runs the real binaries (docs/DEPLOY.md, "Replicas on PostgreSQL"): two
// `svc server` processes started together on one empty PostgreSQL database (they migrate it once),
// and two `svc edge` processes, each following a different replica first. A deployment made through
// one replica is served through the edge that follows the other, and a revoke made through one
// reaches both edges within a second. Then the replica that runs the sweeper is SIGKILLed while
// management calls (round-robin over both replicas, retried on the other when one fails, as a load
// balancer would) and edge traffic go on: every acknowledged write is in the database, every edge
// request is answered 200 and its run reaches the store, both edges follow the survivor, and the
// sweeper moves to it.
func TestReplicasOnPostgreSQL(t *testing.T) {
	pg := storetest.Postgres(t)
	// The server trusts loopback, so the password is never checked: it is there to be kept out of logs.
	dbURL := strings.Replace(pg.NewEmptyDatabase(t), "://svc@", "://svc:s3cret-pw@", 1)
	home, dir := t.TempDir(), t.TempDir()
	env := svcEnv(home, "SVC_DATABASE_URL="+dbURL)

	var servers [2]*devProcess
	for i := range servers {
		servers[i] = spawn(t, dir, env, "server", "--addr", "127.0.0.1:0", "--data", filepath.Join(home, fmt.Sprint("data", i)))
	}
	var apis [2]string
	for i, s := range servers {
		apis[i] = s.waitReady(t, apiLine)
	}
	for i, s := range servers {
		if strings.Contains(s.stdout.String()+s.stderr.String(), "s3cret-pw") {
			t.Fatalf("replica %d printed the database's password", i)
		}
	}
	created := runSvc(t, dir, env, "edge-tokens", "create", "edges") // --database from SVC_DATABASE_URL
	token := strings.TrimSpace(created.stdout)
	if created.code != 0 || !strings.HasPrefix(token, "svc-edge-") {
		t.Fatalf("edge-tokens create: exit %d\n%s%s", created.code, created.stdout, created.stderr)
	}
	var edges [2]*devProcess
	var edgeAddrs [2]string
	for i := range edges {
		cp := apis[i] + "," + apis[1-i] // edge i follows replica i first
		edges[i] = spawn(t, dir, svcEnv(home, "SVC_EDGE_TOKEN="+token), "edge", "--control-plane", cp, "--addr", "127.0.0.1:0",
			"--endpoint-domain", "edge.test", "--max-stale", "1m")
		edgeAddrs[i] = edges[i].waitReady(t, edgeReady)
	}
	call := [2]func(slug, key string) (int, error){edgeCaller(edgeAddrs[0]), edgeCaller(edgeAddrs[1])}
	within := func(e int, slug, key string, want int, limit time.Duration, what string) time.Duration {
		t.Helper()
		start := time.Now()
		for {
			st, err := call[e](slug, key)
			if err == nil && st == want {
				return time.Since(start)
			}
			if time.Since(start) > limit {
				t.Fatalf("%s: edge %d answers %d (%v) after %v, want %d\nedge stderr:\n%s", what, e, st, err, limit, want, edges[e].stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	// One identity, used through both replicas.
	ctx := context.Background()
	sdkOf := [2]*cloudapi.Client{}
	sdk, err := cloudapi.New(apis[0], "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sdkOf {
		sdkOf[i] = cloudapi.New(apis[i], sdk.Token).WithProject(sdk.OrgSlug, sdk.ProjectSlug)
	}
	deploy := func(via int, slug string) (*cloudapi.Deployment, *cloudapi.IssuedKey) {
		t.Helper()
		d, err := sdkOf[via].CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, Target: cloudapi.Target{Kind: "multi_model"}})
		if err != nil {
			t.Fatal(err)
		}
		k, err := sdkOf[via].IssueDeploymentKey(ctx, d.ID, "k")
		if err != nil {
			t.Fatal(err)
		}
		return d, k
	}

	// Made through replica 0, served through the edge that follows replica 1; revoked through replica
	// 1, refused by both edges within a second.
	d, k := deploy(0, "made-on-0")
	within(1, "made-on-0", k.Plaintext, 200, 5*time.Second, "a deployment made through replica 0, through the edge of replica 1")
	within(0, "made-on-0", k.Plaintext, 200, 5*time.Second, "the same through the edge of replica 0")
	if _, err := sdkOf[1].RevokeDeploymentKey(ctx, d.ID, k.Key.ID); err != nil {
		t.Fatal(err)
	}
	for e := range edges {
		took := within(e, "made-on-0", k.Plaintext, 401, time.Second, "a revoke made through replica 1")
		t.Logf("edge %d refuses the revoked key after %v", e, took)
	}

	// Which replica sweeps? Exactly one.
	leader := -1
	for start := time.Now(); leader < 0; time.Sleep(50 * time.Millisecond) {
		l0, l1 := leads(apis[0]), leads(apis[1])
		if l0 && l1 {
			t.Fatal("both replicas report svc_leader 1")
		}
		if l0 {
			leader = 0
		} else if l1 {
			leader = 1
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("no replica reports svc_leader 1")
		}
	}
	survivor := 1 - leader

	// Load: edge traffic on both edges, management writes round-robin over both replicas.
	_, loadKey := deploy(survivor, "under-load")
	mgmt, _ := deploy(survivor, "managed")
	for e := range edges {
		within(e, "under-load", loadKey.Plaintext, 200, 5*time.Second, "the load deployment")
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var served, failed atomic.Int64
	var failures sync.Map
	for e := range edges {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for loadCtx.Err() == nil {
					st, err := call[e]("under-load", loadKey.Plaintext)
					if err == nil && st == 200 {
						served.Add(1)
						continue
					}
					failed.Add(1)
					failures.Store(fmt.Sprintf("edge %d: %d %v", e, st, err), true)
				}
			}()
		}
	}
	// Management writes: issue a key, then revoke it (an endpoint holds at most 20 enabled keys), each
	// sent to the next replica in turn and, when that one does not answer, to the other, as a load
	// balancer retries. Only answers count as acknowledged; a write whose answer was lost may or may
	// not have committed, and either is right.
	var mu sync.Mutex
	issued, revoked := map[string]bool{}, map[string]bool{} // key ids acknowledged
	var refused []string                                    // calls that both replicas failed or refused
	send := func(i int, call func(c *cloudapi.Client) error) error {
		err := call(sdkOf[i%2])
		var ce *cloudapi.Error
		if err != nil && !errors.As(err, &ce) {
			err = call(sdkOf[(i+1)%2])
		}
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			var k *cloudapi.IssuedKey
			err := send(i, func(c *cloudapi.Client) (err error) {
				k, err = c.IssueDeploymentKey(ctx, mgmt.ID, fmt.Sprintf("load-%d", i))
				return err
			})
			mu.Lock()
			if err != nil {
				refused = append(refused, "issue: "+err.Error())
			} else {
				issued[k.Key.ID] = true
			}
			mu.Unlock()
			if err != nil {
				continue
			}
			err = send(i+1, func(c *cloudapi.Client) error {
				_, err := c.RevokeDeploymentKey(ctx, mgmt.ID, k.Key.ID)
				return err
			})
			mu.Lock()
			if err != nil {
				refused = append(refused, "revoke: "+err.Error())
			} else {
				revoked[k.Key.ID] = true
			}
			mu.Unlock()
		}
	}()

	time.Sleep(time.Second) // on purpose: the load runs a while before the leader is killed
	if err := servers[leader].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-servers[leader].done
	killedAt := time.Now()
	for !leads(apis[survivor]) {
		if time.Since(killedAt) > 10*time.Second {
			t.Fatalf("the sweeper did not move to the surviving replica\n%s", servers[survivor].stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("the sweeper moved to replica %d %v after the SIGKILL", survivor, time.Since(killedAt))
	time.Sleep(2 * time.Second) // load goes on against the survivor
	stopLoad()
	wg.Wait()

	if failed.Load() != 0 {
		var list []string
		failures.Range(func(k, _ any) bool { list = append(list, k.(string)); return true })
		t.Errorf("%d of %d edge requests failed across the SIGKILL: %v", failed.Load(), served.Load()+failed.Load(), list)
	}
	// A call in flight on the replica that died may fail on both sides (its retry raced the commit of
	// the first attempt); more than that would be lost calls.
	if len(refused) > 2 {
		t.Errorf("management calls that failed on both replicas: %v", refused)
	}
	keys, err := sdkOf[survivor].ListDeploymentKeys(ctx, mgmt.ID)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]cloudapi.Key{}
	for _, k := range keys {
		have[k.ID] = k
	}
	for id := range issued {
		if k, ok := have[id]; !ok {
			t.Errorf("key %s was issued (acknowledged), and is not in the database", id)
		} else if revoked[id] && k.Enabled {
			t.Errorf("key %s was revoked (acknowledged), and is enabled in the database", id)
		}
	}
	t.Logf("%d edge requests answered, %d keys issued and %d revoked (acknowledged) across the SIGKILL", served.Load(), len(issued), len(revoked))

	// Every answered edge request's run reaches the store, shipped to whichever replica lives.
	store, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var runs int64
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		err := store.QueryRow(`SELECT count(*) FROM runs AS r JOIN deployments AS d ON d.id = r.deployment_id WHERE d.slug = 'under-load'`).Scan(&runs)
		// The warm-up calls of within() count too: one per edge.
		if err == nil && runs == served.Load()+2 {
			break
		}
		if time.Since(start) > 15*time.Second {
			t.Fatalf("runs in the store: %d (%v), want %d (every answered request's run)", runs, err, served.Load()+2)
		}
	}

	// Both edges follow the survivor: a deployment made and a key revoked after the kill reach them.
	d2, k2 := deploy(survivor, "after-kill")
	for e := range edges {
		within(e, "after-kill", k2.Plaintext, 200, 5*time.Second, "a deployment made after the kill")
	}
	if _, err := sdkOf[survivor].RevokeDeploymentKey(ctx, d2.ID, k2.Key.ID); err != nil {
		t.Fatal(err)
	}
	for e := range edges {
		took := within(e, "after-kill", k2.Plaintext, 401, time.Second, "a revoke after the kill")
		t.Logf("edge %d refuses a key revoked after the kill within %v", e, took)
	}
	for e, p := range edges {
		if strings.Contains(p.stdout.String()+p.stderr.String(), token) {
			t.Fatalf("edge %d printed its token", e)
		}
	}
}
