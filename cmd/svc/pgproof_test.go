package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/svcdev/svc/cloudapi"
	_ "github.com/svcdev/svc/db" // the pgx driver, to read the runs table
	"github.com/svcdev/svc/db/storetest"
)

// pgPlane is an `svc server` process on a PostgreSQL server of its own (which a test may stop), with an
// endpoint and a key made through its API.
type pgPlane struct {
	pg      *storetest.Server
	dbURL   string
	home    string
	dir     string
	data    string
	addr    string // fixed, so that the process can be started again on it
	api     string
	sdk     *cloudapi.Client
	depID   string
	key     string
	client  *http.Client
	process *devProcess
	extra   []string // more flags of svc server
	// metricsAddr is the --metrics-addr the server was given, "" for none.
	metricsAddr string
}

// newPGPlane starts PostgreSQL and `svc server --database postgres://…` (with its metrics on an address
// of their own when metrics) and makes endpoint "pg" with a key.
func newPGPlane(t *testing.T, metrics bool) *pgPlane {
	t.Helper()
	pg := storetest.Postgres(t)
	p := &pgPlane{pg: pg, dbURL: pg.NewEmptyDatabase(t), home: t.TempDir(), dir: t.TempDir(), addr: freeAddr(t)}
	if metrics {
		// Chosen once PostgreSQL runs: a port picked and let go before its start can be the one
		// PostgreSQL's own pick gets next (a run failed so, the server unable to bind its metrics).
		p.metricsAddr = freeAddr(t)
		p.extra = []string{"--metrics-addr", p.metricsAddr}
	}
	p.data = filepath.Join(p.home, "data")
	p.start(t)
	p.api = "http://" + p.addr
	sdk, d, k := multiModelEndpoint(t, p.api, "pg")
	p.sdk, p.depID, p.key = sdk, d.ID, k.Plaintext
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	return p
}

func (p *pgPlane) env() []string { return svcEnv(p.home, "SVC_DATABASE_URL="+p.dbURL) }

// start starts `svc server` on the plane's address, database and --data (its recorder's spool).
func (p *pgPlane) start(t *testing.T) {
	t.Helper()
	p.process, _ = startProcess(t, p.dir, p.env(), apiLine, append([]string{"server", "--addr", p.addr, "--data", p.data}, p.extra...)...)
}

// chat sends one chat completion whose user message is content to the plane's own endpoint.
func (p *pgPlane) chat(content string) (int, error) {
	req, _ := http.NewRequest("POST", p.api+"/e/pg/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"`+content+`"}]}`))
	req.Header.Set("Authorization", "Bearer "+p.key)
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// stored counts the runs in the database by the content of their user message (SQL: thousands of runs
// read through the API one by one would take longer than the test).
func (p *pgPlane) stored(t *testing.T) map[string]int {
	t.Helper()
	return storedRuns(t, p.dbURL)
}

var contentRe = regexp.MustCompile(`"content":"([^"]*)"`)

func storedRuns(t *testing.T, dbURL string) map[string]int {
	t.Helper()
	sqldb, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	rows, err := sqldb.Query(`SELECT request FROM runs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var req string
		if err := rows.Scan(&req); err != nil {
			t.Fatal(err)
		}
		if m := contentRe.FindStringSubmatch(req); m != nil {
			out[m[1]]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// load sends chats from workers goroutines, each until stop says so or it has sent perWorker (0: no
// bound), and records when each 200 arrived, by content.
type load struct {
	mu       sync.Mutex
	answered map[string]time.Time
	failed   atomic.Int64
	firstErr atomic.Value // the first failure, for the test's message
	stop     atomic.Bool
	wg       sync.WaitGroup
}

func startLoad(p *pgPlane, prefix string, workers, perWorker int) *load {
	l := &load{answered: map[string]time.Time{}}
	for w := 0; w < workers; w++ {
		l.wg.Add(1)
		go func(w int) {
			defer l.wg.Done()
			for i := 0; !l.stop.Load() && (perWorker == 0 || i < perWorker); i++ {
				content := fmt.Sprintf("%s-w%d-%d", prefix, w, i)
				if st, err := p.chat(content); err == nil && st == 200 {
					l.mu.Lock()
					l.answered[content] = time.Now()
					l.mu.Unlock()
				} else {
					l.failed.Add(1)
					l.firstErr.CompareAndSwap(nil, fmt.Sprintf("status %d, %v", st, err))
					if perWorker == 0 {
						time.Sleep(20 * time.Millisecond) // an unanswered request is not a busy loop
					}
				}
			}
		}(w)
	}
	return l
}

func (l *load) wait() map[string]time.Time {
	l.stop.Store(true)
	l.wg.Wait()
	return l.answered
}

// waitStored waits until every content in want is stored, then checks that each is stored exactly once
// and that nothing else but extra is; it returns the stored runs.
func waitStored(t *testing.T, p *pgPlane, want map[string]bool, extra func(string) bool, within time.Duration) map[string]int {
	t.Helper()
	var got map[string]int
	for deadline := time.Now().Add(within); ; time.Sleep(250 * time.Millisecond) {
		got = p.stored(t)
		missing := 0
		for c := range want {
			if got[c] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d answered requests have no run in PostgreSQL after %s\nsvc server stderr:\n%s", missing, len(want), within, tail(p.process.stderr.String()))
		}
	}
	time.Sleep(500 * time.Millisecond) // a duplicate, if one were coming
	got = p.stored(t)
	for c, n := range got {
		if n != 1 {
			t.Errorf("run %q stored %d times", c, n)
		}
		if !want[c] && (extra == nil || !extra(c)) {
			t.Errorf("a run nobody was answered for: %q", c)
		}
	}
	return got
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}

// metric reads one counter or gauge (without labels) from a /metrics page.
func metric(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s: no %s in\n%s", url, name, b)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestPostgresStoresEveryAnsweredRun runs `svc server --database postgres://…` as a process under a
// bounded load (8 goroutines x 250 chat completions): every answered request's run is in PostgreSQL,
// exactly once, and the recorder dropped none.
func TestPostgresStoresEveryAnsweredRun(t *testing.T) {
	p := newPGPlane(t, true)
	metricsAddr := p.metricsAddr

	start := time.Now()
	answered := startLoad(p, "a", 8, 250)
	answered.wg.Wait()
	elapsed := time.Since(start)
	if len(answered.answered) != 2000 {
		t.Fatalf("%d of 2000 requests answered 200 (%d failed)\nstderr:\n%s", len(answered.answered), answered.failed.Load(), tail(p.process.stderr.String()))
	}
	want := map[string]bool{}
	for c := range answered.answered {
		want[c] = true
	}
	got := waitStored(t, p, want, nil, 30*time.Second)
	if len(got) != len(answered.answered) {
		t.Fatalf("%d runs stored for %d answered requests", len(got), len(answered.answered))
	}
	if d := metric(t, "http://"+metricsAddr+"/metrics", "svc_recorder_runs_dropped_total"); d != 0 {
		t.Fatalf("svc_recorder_runs_dropped_total %v, want 0", d)
	}
	t.Logf("2000 requests answered in %s (%.0f/s), 2000 runs stored once each", elapsed.Round(time.Millisecond), 2000/elapsed.Seconds())
}

// TestPostgresOutageLosesNoRun stops PostgreSQL (pg_ctl stop -m fast) for 5 s in the middle of a load
// on `svc server`: while it is away runs wait in the recorder's spool (svc_recorder_spooled_runs above
// 0), /readyz stays 200 and says the database is not answering and the recorder behind, and the server
// keeps answering chats; once it is back every answered request's run is stored, exactly once.
func TestPostgresOutageLosesNoRun(t *testing.T) {
	p := newPGPlane(t, true)
	metricsAddr := p.metricsAddr
	l := startLoad(p, "b", 4, 0)
	time.Sleep(time.Second) // on purpose: the load runs a while before the outage
	p.pg.StopFast(t)
	stoppedAt := time.Now()
	maxSpooled, ready := 0.0, ""
	for time.Since(stoppedAt) < 5*time.Second {
		maxSpooled = max(maxSpooled, metric(t, "http://"+metricsAddr+"/metrics", "svc_recorder_spooled_runs"))
		if time.Since(stoppedAt) > 3*time.Second && ready == "" {
			resp, err := http.Get(p.api + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			ready = fmt.Sprintf("%d %s", resp.StatusCode, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.HasPrefix(ready, "200 ") || !strings.Contains(ready, `"database":"not answering"`) || !strings.Contains(ready, `"recorder":"behind"`) {
		t.Errorf("/readyz with PostgreSQL stopped: %s; want 200, the database not answering, the recorder behind", ready)
	}
	l.mu.Lock()
	duringOutage := 0
	for _, at := range l.answered {
		if at.After(stoppedAt) {
			duringOutage++
		}
	}
	l.mu.Unlock()
	p.pg.Start(t)
	time.Sleep(time.Second) // on purpose: the load goes on a while once PostgreSQL is back
	answered := l.wait()
	if duringOutage == 0 {
		t.Fatalf("no request answered while PostgreSQL was stopped (%d failed): the outage proved nothing\nstderr:\n%s", l.failed.Load(), tail(p.process.stderr.String()))
	}
	if maxSpooled == 0 {
		t.Errorf("svc_recorder_spooled_runs never rose above 0 during the outage")
	}
	want := map[string]bool{}
	for c := range answered {
		want[c] = true
	}
	got := waitStored(t, p, want, nil, 60*time.Second)
	t.Logf("%d requests answered (%d while PostgreSQL was stopped, %d not answered), up to %v runs spooled, %d runs stored once each",
		len(answered), duringOutage, l.failed.Load(), maxSpooled, len(got))
}

// TestSIGKILLedServerReplaysItsSpoolOnPostgres SIGKILLs `svc server` while PostgreSQL is stopped and its
// answered runs wait in its spool; PostgreSQL and the server are started again on the same --data:
// every run answered more than 200 ms before the kill is replayed from the spool and stored exactly
// once.
func TestSIGKILLedServerReplaysItsSpoolOnPostgres(t *testing.T) {
	p := newPGPlane(t, false)
	if st, err := p.chat("warm"); st != 200 {
		t.Fatalf("chat: %d %v", st, err)
	}
	// The server's edge serves an endpoint and key from its in-process cache (internal/core edgeCache),
	// which the replica's feed watcher flushes once after the endpoint's creation (the feed's head
	// moved); a lookup missing the cache goes to the database, which is about to be away, and is a
	// 500. So: past that flush, one more request fills the cache again. The flush is inside the
	// process, seen by nothing a test can read: this waits past the feed's poll (a second) on purpose.
	time.Sleep(1500 * time.Millisecond)
	if st, err := p.chat("warm-2"); st != 200 {
		t.Fatalf("chat: %d %v", st, err)
	}
	p.pg.StopFast(t)
	l := startLoad(p, "c", 4, 0)
	time.Sleep(2 * time.Second) // on purpose: runs answered with PostgreSQL away pile up in the spool
	killedAt := time.Now()
	if err := p.process.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.process.done
	answered := l.wait()
	want := map[string]bool{"warm": true, "warm-2": true}
	for c, at := range answered {
		if at.Before(killedAt.Add(-200 * time.Millisecond)) {
			want[c] = true
		}
	}
	if len(want) < 20 {
		t.Fatalf("only %d requests answered more than 200 ms before the kill (%d failed, the first: %v): the load did not run\nstderr:\n%s",
			len(want)-2, l.failed.Load(), l.firstErr.Load(), tail(p.process.stderr.String()))
	}
	p.pg.Start(t)
	p.start(t)
	got := waitStored(t, p, want, func(c string) bool { _, ok := answered[c]; return ok }, 60*time.Second)
	t.Logf("%d requests answered while PostgreSQL was stopped, %d of them more than 200 ms before the SIGKILL; %d runs stored once each after the restart",
		len(answered), len(want)-2, len(got))
}

// TestNULByteThroughEdgeOnPostgres sends a request whose body holds a raw NUL byte through an `svc edge`
// process whose control plane stores runs on PostgreSQL, then 20 ordinary ones: the poisoned run is
// stored and read back through the API as sent, every later run is stored once, and the edge sent no
// batch again more than a bounded number of times (svc_edge_sync_ship_retries_total).
func TestNULByteThroughEdgeOnPostgres(t *testing.T) {
	p := newPGPlane(t, false)
	created := runSvc(t, p.dir, p.env(), "edge-tokens", "create", "edge-1", "--data", p.data)
	token := strings.TrimSpace(created.stdout)
	if created.code != 0 || token == "" {
		t.Fatalf("edge-tokens create: exit %d\n%s%s", created.code, created.stdout, created.stderr)
	}
	metricsAddr := freeAddr(t)
	edge, edgeAddr := startEdge(t, p.dir, p.home, token, p.api, "--addr", "127.0.0.1:0",
		"--spool-dir", filepath.Join(p.home, "edge-spool"), "--metrics-addr", metricsAddr)
	waitReadyz(t, edgeAddr)
	send := func(body string) int {
		req, _ := http.NewRequest("POST", "http://"+edgeAddr+"/v1/chat/completions", strings.NewReader(body))
		req.Host = "pg.edge.test"
		req.Header.Set("Authorization", "Bearer "+p.key)
		resp, err := p.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	poisoned := "{\"messages\":[{\"role\":\"user\",\"content\":\"poison\x00ed\"}]}"
	if st := send(poisoned); st != 400 {
		t.Fatalf("the request with a NUL byte: %d, want 400", st)
	}
	want := map[string]bool{}
	for i := 0; i < 20; i++ {
		c := fmt.Sprintf("after-%d", i)
		if st := send(`{"messages":[{"role":"user","content":"` + c + `"}]}`); st != 200 {
			t.Fatalf("request %d after the poisoned one: %d\nedge stderr:\n%s", i, st, tail(edge.stderr.String()))
		}
		want[c] = true
	}
	// The poisoned body is not JSON, so its content never matches contentRe: it is found by its run.
	waitStored(t, p, want, nil, 30*time.Second)

	ctx := context.Background()
	var poisonedRun *cloudapi.Run
	for deadline := time.Now().Add(15 * time.Second); poisonedRun == nil; time.Sleep(200 * time.Millisecond) {
		page, err := p.sdk.ListRuns(ctx, p.depID, cloudapi.ListRunsOptions{Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Runs {
			if r.StatusCode != 400 {
				continue
			}
			run, err := p.sdk.GetRun(ctx, p.depID, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			poisonedRun = run
		}
		if poisonedRun == nil && time.Now().After(deadline) {
			t.Fatalf("the poisoned request's run is not stored (%d runs)\nedge stderr:\n%s\nserver stderr:\n%s",
				len(page.Runs), tail(edge.stderr.String()), tail(p.process.stderr.String()))
		}
	}
	// A body that is not JSON is shown as a JSON string of the bytes sent (docs/API.md, runs).
	var shown string
	if err := json.Unmarshal(poisonedRun.Request, &shown); err != nil || shown != poisoned {
		t.Fatalf("the poisoned request reads back as %s (%v), want the string %q", poisonedRun.Request, err, poisoned)
	}
	retries := metric(t, "http://"+metricsAddr+"/metrics", "svc_edge_sync_ship_retries_total")
	if retries > 2 {
		t.Fatalf("svc_edge_sync_ship_retries_total %v: a batch was sent again and again", retries)
	}
	if refused := metric(t, "http://"+metricsAddr+"/metrics", "svc_edge_sync_runs_refused_total"); refused != 0 {
		t.Fatalf("svc_edge_sync_runs_refused_total %v: the poisoned run was set aside, not stored", refused)
	}
	t.Logf("poisoned run %s stored and read back as sent; 20 later runs stored; %v batches sent again", poisonedRun.ID, retries)
}

// multiModelEndpoint signs in anonymously at the management API api, creates a multi-model deployment
// with slug and issues it a key: what the multi-process tests serve through.
func multiModelEndpoint(t *testing.T, api, slug string) (*cloudapi.Client, *cloudapi.Deployment, *cloudapi.IssuedKey) {
	t.Helper()
	ctx := context.Background()
	sdk, err := cloudapi.New(api, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := sdk.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: slug, Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := sdk.IssueDeploymentKey(ctx, d.ID, "k")
	if err != nil {
		t.Fatal(err)
	}
	return sdk, d, key
}
