package recorder

import (
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/db/storetest"
)

// envOr reads a tuning of a load test from the environment (SVC_RECORDER_LOAD_*), for runs by hand
// longer than the suite's.
func envOr[T int | time.Duration](t *testing.T, name string, def T) T {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var v T
	switch p := any(&v).(type) {
	case *int:
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		*p = n
	case *time.Duration:
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		*p = d
	}
	return v
}

// svc server on PostgreSQL records runs at the rate it answers them (7,643 a second, measured; 8,000
// here), and PostgreSQL goes away in the middle (pg_ctl stop -m fast, then started again): with the
// recorder's defaults and a spool, no run is dropped, and every one is stored once the store is back.
// The suite's run is 5 s with a 2 s outage (bounded on a shared machine: 40,000 runs, 60 MB through the
// spool; 1,000 a second under the race detector); SVC_RECORDER_LOAD=60s SVC_RECORDER_LOAD_OUTAGE=30s
// measures the 30 s outage by hand.
func TestFullRateThroughAnOutageDropsNothing(t *testing.T) {
	pg := storetest.PostgresOnly(t)
	sqldb := fixture(t)
	def := 8000
	if raceDetector {
		// The race detector slows the recorder's writes several times over (on 2 shared cores, 8,000 a
		// second through a 2 s outage dropped 10,171 of 40,062): the same test at an eighth of the rate.
		def = 1000
	}
	rate := envOr(t, "SVC_RECORDER_LOAD_RATE", def)
	total := envOr(t, "SVC_RECORDER_LOAD", 5*time.Second)
	outage := envOr(t, "SVC_RECORDER_LOAD_OUTAGE", 2*time.Second)
	rec, err := Open(sqldb, Options{SpoolDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()

	var recorded atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	go func() { // the traffic: rate runs a second, in ticks of 10 ms
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		per := rate / 100
		i := 0
		for time.Since(start) < total {
			<-tick.C
			want := int(time.Since(start).Seconds() * float64(rate))
			for n := 0; i < want && n < 4*per; n++ {
				rec.Record(benchRun(i))
				i++
			}
			recorded.Store(int64(i))
		}
	}()
	time.Sleep((total - outage) / 2) // on purpose: the load runs before the outage
	pg.StopFast(t)
	down := time.Now()
	time.Sleep(outage) // on purpose: the outage lasts this long under load
	pg.Start(t)
	t.Logf("PostgreSQL away for %v, %d runs recorded by then", time.Since(down).Round(time.Millisecond), recorded.Load())
	<-done
	elapsed := time.Since(start)
	rec.Flush()
	deadline := time.Now().Add(total + 2*time.Minute)
	for rec.Spooled() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	rec.Flush()
	var stored int64
	if err := sqldb.QueryRow(`SELECT count(*) FROM runs`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	n := recorded.Load()
	t.Logf("%d runs recorded in %v (%.0f/s): %d dropped, %d failed, %d stored, %d still spooled",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), rec.Dropped(), rec.Failed(), stored, rec.Spooled())
	if rec.Dropped() != 0 || stored != n {
		t.Errorf("%d of %d runs dropped, %d stored; want every run stored", rec.Dropped(), n, stored)
	}
}
