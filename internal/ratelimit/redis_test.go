package ratelimit

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/redistest"
)

// syncBuffer is a log sink read while limiters write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTestRedis(t *testing.T, url string, logs *syncBuffer) *Redis {
	t.Helper()
	if logs == nil {
		logs = &syncBuffer{}
	}
	r, err := NewRedis(RedisOptions{URL: url, Logger: slog.New(slog.NewTextHandler(logs, nil)), RetryDown: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// Two processes (each its own Redis client and local buckets, as two edges) share one count: a key
// limited to 60 requests a minute admits 60 between them under concurrent load, however the requests
// split, plus what refills while the test runs (one a second).
func TestRedisLimitIsOneCountAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	a := newTestRedis(t, srv.URL, nil).Limiter(NewLocal(), 2)
	b := newTestRedis(t, srv.URL, nil).Limiter(NewLocal(), 2)
	scopes := []Scope{{Name: "deployment", ID: "dep_1"}, {Name: "key", ID: "key_1", Rule: Rule{RequestsPerMinute: 60}}}
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			lim := a
			if w%3 == 0 { // an uneven split: a third of the callers on one process
				lim = b
			}
			for i := 0; i < 25; i++ {
				d := lim.Take(scopes...)
				if d.Allowed {
					admitted.Add(1)
				} else {
					refused.Add(1)
					if d.Refused != "key" || d.RetryAfter <= 0 || d.RetryAfter > time.Second {
						t.Errorf("refusal: %+v", d)
					}
				}
			}
		}(w)
	}
	wg.Wait()
	refill := int64(time.Since(start) / time.Second)
	if got := admitted.Load(); got < 60 || got > 60+refill+1 {
		t.Fatalf("admitted %d of 200 (refused %d) in %v; want 60 (+%d refilled)", got, refused.Load(), time.Since(start), refill)
	}
	d := b.Take(scopes...)
	if d.Requests.Limit != 60 || d.Requests.Remaining != 0 || d.Requests.Reset < 50*time.Second {
		t.Fatalf("headers after the burst: %+v", d.Requests)
	}
}

// Tokens charged through one process count against the other; a changed limit starts a full bucket.
func TestRedisTokensAreChargedAcrossProcesses(t *testing.T) {
	srv := redistest.Start(t)
	ra := newTestRedis(t, srv.URL, nil)
	a := ra.Limiter(NewLocal(), 1)
	b := newTestRedis(t, srv.URL, nil).Limiter(NewLocal(), 1)
	scopes := []Scope{{Name: "deployment", ID: "dep_t", Rule: Rule{TokensPerMinute: 60}}}
	if d := a.Take(scopes...); !d.Allowed || d.Tokens.Limit != 60 || d.Tokens.Remaining != 60 {
		t.Fatalf("first request: %+v", d)
	}
	// As after a restart of Redis, the script is gone: the charge loads it again.
	if err := ra.c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	a.Charge(90, scopes...) // more than the bucket: it is emptied, then refills a token a second
	var d Decision
	for deadline := time.Now().Add(900 * time.Millisecond); ; time.Sleep(5 * time.Millisecond) {
		if d = b.Take(scopes...); !d.Allowed || time.Now().After(deadline) {
			break
		}
	}
	if d.Allowed || d.Refused != "deployment" || d.RetryAfter <= 0 || d.RetryAfter > time.Second || d.Tokens.Reset < 55*time.Second {
		t.Fatalf("after a spent tokens bucket, on the other process: %+v", d)
	}
	raised := []Scope{{Name: "deployment", ID: "dep_t", Rule: Rule{TokensPerMinute: 120}}}
	if d := b.Take(raised...); !d.Allowed || d.Tokens.Remaining != 120 {
		t.Fatalf("a raised limit: %+v", d)
	}
}

// When Redis stops answering, each process decides with its own buckets at its share of the limit,
// counts it and says so in the log, once; when Redis is back, the count is shared again.
func TestRedisDownFallsBackToLocalShares(t *testing.T) {
	srv := redistest.Start(t)
	logs := &syncBuffer{}
	r := newTestRedis(t, srv.URL, logs)
	lim := r.Limiter(NewLocal(), 2)
	scopes := []Scope{{Name: "deployment", ID: "dep_f", Rule: Rule{RequestsPerMinute: 20}}}
	if d := lim.Take(scopes...); !d.Allowed || d.Requests.Limit != 20 {
		t.Fatalf("with Redis: %+v", d)
	}
	srv.Stop()
	admitted := 0
	start := time.Now()
	for i := 0; i < 30; i++ {
		if d := lim.Take(scopes...); d.Allowed {
			admitted++
			if d.Requests.Limit != 10 {
				t.Fatalf("a local decision reports limit %d, want this process's share 10", d.Requests.Limit)
			}
		}
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("30 decisions with Redis down took %v", took)
	}
	if admitted != 10 {
		t.Fatalf("admitted %d with Redis down, want the share of 10", admitted)
	}
	if n := r.Fallbacks("edge"); n != 30 {
		t.Fatalf("svc_ratelimit_fallback_total{limiter=edge} = %v, want 30", n)
	}
	if n := strings.Count(logs.String(), "Redis cannot be reached"); n != 1 {
		t.Fatalf("%d log lines about Redis being down, want 1:\n%s", n, logs.String())
	}
	lim.Charge(5, scopes...) // charged locally, no panic, no wait
}

// The API's throttles: mints per address and sign-in failures are one count across processes.
func TestRedisThrottlesAreShared(t *testing.T) {
	srv := redistest.Start(t)
	r1, r2 := newTestRedis(t, srv.URL, nil), newTestRedis(t, srv.URL, nil)
	m1 := r1.Buckets("mint", 3, time.Minute, NewBuckets(3, time.Minute, nil))
	m2 := r2.Buckets("mint", 3, time.Minute, NewBuckets(3, time.Minute, nil))
	for i, m := range []KeyBuckets{m1, m2, m1} {
		if ok, _ := m.Take("10.0.0.1"); !ok {
			t.Fatalf("mint %d refused", i)
		}
	}
	if ok, wait := m2.Take("10.0.0.1"); ok || wait < 50*time.Second {
		t.Fatalf("a fourth mint from the address on the other process: %v %v", ok, wait)
	}
	if ok, _ := m2.Take("10.0.0.2"); !ok {
		t.Fatal("another address was refused")
	}

	b1 := r1.Backoff("signin-account", 2, time.Second, time.Minute, time.Hour, NewBackoff(2, time.Second, time.Minute, time.Hour, nil))
	b2 := r2.Backoff("signin-account", 2, time.Second, time.Minute, time.Hour, NewBackoff(2, time.Second, time.Minute, time.Hour, nil))
	if w := b1.Fail("a@example.com") + b2.Fail("a@example.com"); w != 0 {
		t.Fatalf("the free failures cost %v", w)
	}
	if w := b1.Fail("a@example.com"); w < 900*time.Millisecond || w > time.Second {
		t.Fatalf("the third failure's wait: %v", w)
	}
	if w := b2.Wait("a@example.com"); w <= 0 || w > time.Second {
		t.Fatalf("the wait seen by the other process: %v", w)
	}
	if w := b2.Fail("a@example.com"); w < 1900*time.Millisecond || w > 2*time.Second {
		t.Fatalf("the fourth failure doubles the wait: %v", w)
	}
	b1.Reset("a@example.com")
	if w := b2.Wait("a@example.com"); w != 0 {
		t.Fatalf("after a reset: %v", w)
	}
}

// load runs callers goroutines per limiter, each taking n times, and counts the admits.
func load(lims []Limiter, callers, n int, scopes []Scope) (admitted int64) {
	var got atomic.Int64
	var wg sync.WaitGroup
	for _, lim := range lims {
		for w := 0; w < callers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < n; i++ {
					if lim.Take(scopes...).Allowed {
						got.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	return got.Load()
}

// Leasing keeps one limit exact: a key at 20 a minute admits 19-21 across two processes under
// concurrent load (near the limit every admit is a round trip), and one at 1,000 a minute across four
// processes admits 1,000 less at most a few requests still leased when the load stops, never more
// than the limit and what refilled.
func TestRedisLeasesKeepLimitsExact(t *testing.T) {
	srv := redistest.Start(t)
	two := []Limiter{newTestRedis(t, srv.URL, nil).Limiter(NewLocal(), 2), newTestRedis(t, srv.URL, nil).Limiter(NewLocal(), 2)}
	small := []Scope{{Name: "deployment", ID: "dep_s"}, {Name: "key", ID: "key_s", Rule: Rule{RequestsPerMinute: 20}}}
	start := time.Now()
	if got := load(two, 8, 10, small); got < 19 || got > 21+int64(time.Since(start)/(3*time.Second)) {
		t.Fatalf("a key at 20 a minute admitted %d across two processes in %v; want 19-21", got, time.Since(start))
	}

	var four []Limiter
	for i := 0; i < 4; i++ {
		four = append(four, newTestRedis(t, srv.URL, nil).Limiter(NewLocal(), 4))
	}
	big := []Scope{{Name: "deployment", ID: "dep_b", Rule: Rule{RequestsPerMinute: 1000}}, {Name: "key", ID: "key_b"}}
	start = time.Now()
	got := load(four, 4, 150, big) // 2,400 attempts
	refill := int64(time.Since(start).Seconds()*1000/60) + 1
	if got < 1000-4 || got > 1000+refill {
		t.Fatalf("a deployment at 1,000 a minute admitted %d across four processes in %v; want 996-%d", got, time.Since(start), 1000+refill)
	}
	t.Logf("20/min: exact; 1,000/min: admitted %d in %v", got, time.Since(start))
}

// calls is how many limit scripts Redis has run.
func calls(t *testing.T, r *Redis) int64 {
	t.Helper()
	info, err := r.c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:") || strings.HasPrefix(line, "cmdstat_eval:") {
			v := strings.SplitN(line, "calls=", 2)[1]
			v = v[:strings.IndexByte(v, ',')]
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			n += c
		}
	}
	return n
}

// Far from the limit a process asks Redis once per lease, not once per request; what it leased and
// did not spend goes back when it idles, so that another process sees the whole of what is left.
func TestRedisLeasesSaveRoundTripsAndGoBack(t *testing.T) {
	srv := redistest.Start(t)
	ra := newTestRedis(t, srv.URL, nil)
	a := ra.Limiter(NewLocal(), 1)
	b := newTestRedis(t, srv.URL, nil).Limiter(NewLocal(), 1)
	scopes := []Scope{{Name: "deployment", ID: "dep_l", Rule: Rule{RequestsPerMinute: 1_000_000, TokensPerMinute: 1_000_000}},
		{Name: "key", ID: "key_l", Rule: Rule{RequestsPerMinute: 1_000_000}}}
	before := calls(t, ra)
	const n = 10_000
	if got := load([]Limiter{a}, 4, n/4, scopes); got != n {
		t.Fatalf("admitted %d of %d far from the limit", got, n)
	}
	for i := 0; i < 100; i++ {
		a.Charge(100, scopes...)
	}
	if c := calls(t, ra) - before; c > n/100 {
		t.Fatalf("%d admits far from the limit cost %d scripts in Redis; want at most one per 100", n, c)
	} else {
		t.Logf("%d admits and 100 charges far from the limit: %d scripts in Redis", n, c)
	}
	// The charges are sent every 50 ms (the 10,000 tokens refill in 600 ms); b trusts an answer for
	// 100 ms.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(tokenView + 10*time.Millisecond) {
		d := b.Take(scopes...)
		if d.Allowed && d.Tokens.Remaining <= 1_000_000-5_000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tokens charged on one process, seen from the other: %+v", d)
		}
	}

	// One request leases 1,024 of a bucket of 20,000: the other process sees them taken until the
	// first idles and gives back the 1,023 it did not spend.
	lone := []Scope{{Name: "deployment", ID: "dep_g", Rule: Rule{RequestsPerMinute: 20_000}}}
	if d := a.Take(lone...); !d.Allowed || d.Requests.Remaining != 19_999 {
		t.Fatalf("the first request: %+v", d)
	}
	if d := b.Take(lone...); !d.Allowed || d.Requests.Remaining > 20_000-maxLease-1+10 {
		t.Fatalf("while the first process holds its lease: %+v; want about %d left", d, 20_000-maxLease-1)
	}
	time.Sleep(leaseLife + leaseLife/2 + 50*time.Millisecond) // both idle: their leases go back
	if d := b.Take(lone...); !d.Allowed || d.Requests.Remaining < 20_000-3 {
		t.Fatalf("after both idled: %+v; want all but the 3 admitted left (nothing leased)", d)
	}
}

// When Redis dies the process decides locally and counts it; when Redis is back (a new, empty
// server on the same port: the scripts are gone too) the limit is counted there again.
func TestRedisRecoversAfterAnOutage(t *testing.T) {
	srv := redistest.Start(t)
	logs := &syncBuffer{}
	r := newTestRedis(t, srv.URL, logs)
	lim := r.Limiter(NewLocal(), 2)
	scopes := []Scope{{Name: "deployment", ID: "dep_r", Rule: Rule{RequestsPerMinute: 40, TokensPerMinute: 1000}}}
	if d := lim.Take(scopes...); !d.Allowed || d.Requests.Limit != 40 {
		t.Fatalf("with Redis: %+v", d)
	}
	srv.Stop()
	for i := 0; i < 5; i++ {
		if d := lim.Take(scopes...); !d.Allowed || d.Requests.Limit != 20 {
			t.Fatalf("with Redis down: %+v; want a local decision at the share, 20", d)
		}
	}
	lim.Charge(100, scopes...)
	if n := r.Fallbacks("edge"); n != 5 {
		t.Fatalf("svc_ratelimit_fallback_total{limiter=edge} = %v, want 5", n)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip(err)
	}
	_, port, _ := net.SplitHostPort(srv.Addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var d Decision
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if d = lim.Take(scopes...); d.Requests.Limit == 40 || time.Now().After(deadline) {
			break
		}
	}
	if !d.Allowed || d.Requests.Limit != 40 || d.Requests.Remaining != 39 {
		t.Fatalf("after Redis came back: %+v; want the whole limit counted in the new Redis", d)
	}
	fell := r.Fallbacks("edge")
	lim.Charge(500, scopes...)
	charged := time.Now()
	// Charges reach Redis summed every 50 ms: wait for this one (at most 30 takes of the 38 left), not
	// for a fixed time, which a loaded machine outlasts. The budget refills meanwhile (1000 a minute).
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if d = lim.Take(scopes...); d.Tokens.Remaining < 1000 || time.Now().After(deadline) {
			break
		}
	}
	refilled := int(time.Since(charged).Seconds()*1000/60) + 1
	if !d.Allowed || d.Tokens.Remaining > 500+refilled || r.Fallbacks("edge") != fell {
		t.Fatalf("a charge after Redis came back: %+v (fallbacks %v, were %v)", d, r.Fallbacks("edge"), fell)
	}
	if !strings.Contains(logs.String(), "Redis answers again") {
		t.Fatalf("no line about Redis being back:\n%s", logs.String())
	}
}

// BenchmarkAdmitRedis is BenchmarkAdmit with the limits counted in a real redis-server, far from
// them (the bench's configuration): what a request costs the process with leases. Redis's own CPU
// time is not in it (cmd/svcbench's Redis row counts it).
func BenchmarkAdmitRedis(b *testing.B) {
	srv := redistest.Start(b)
	r, err := NewRedis(RedisOptions{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	l := r.Limiter(NewLocal(), 1)
	rule := Rule{RequestsPerMinute: 100_000_000, TokensPerMinute: 100_000_000}
	scopes := []Scope{{Name: "deployment", ID: "dep_1", Rule: rule}, {Name: "key", ID: "key_1", Rule: rule}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h := http.Header{"Content-Type": {"text/event-stream"}, "X-Request-Id": {"r"}}
			d := l.Take(scopes...)
			d.WriteHeaders(h)
			l.Charge(40, scopes...)
		}
	})
}
