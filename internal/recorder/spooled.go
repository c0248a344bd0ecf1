package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/svcdev/svc/internal/runs"
	"github.com/svcdev/svc/internal/spool"
)

// When the store does not answer (PostgreSQL stopped, a network partition), a batch the recorder
// cannot write goes to the spool instead of being lost (docs/OPERATIONS.md, "The recorder's spool"),
// and so does every later batch until the spool is empty again, so that batches reach the store in the
// order they were made. One goroutine replays spooled batches, oldest first, through Ingest with the
// batch id each got when spooled: a batch written and then replayed again (svc died before the spool
// noted it) is applied once, its runs stored once and counted once in the usage aggregates. A batch
// that finds the spool full is dropped and counted in Dropped, as a full buffer drops.

// sealed is a batch in the spool (internal/spool): its id, how many runs it holds, and its body, one
// line per run (runs.AppendLine, the lines of an edge's batch), until it is appended.
type sealed = spool.Batch

// spooler is the recorder's spool and what it still holds.
type spooler struct {
	disk  *spool.Spool
	retry time.Duration // wait before replaying again after the store failed

	mu      sync.Mutex
	held    []sealed // spooled, not yet written, oldest first
	spooled atomic.Int64
	wake    chan struct{}

	lastWarn atomic.Int64 // Unix ms of the last "spooling" or "spool full" log line
}

// openSpooler opens the spool in dir and returns it with the batches it still holds.
func openSpooler(dir string, maxBytes int64, retry time.Duration) (*spooler, error) {
	disk, held, err := spool.Open(dir, maxBytes, "another svc server; give each its own --data folder")
	if err != nil {
		return nil, err
	}
	s := &spooler{disk: disk, retry: retry, held: held, wake: make(chan struct{}, 1)}
	for _, b := range held {
		s.spooled.Add(int64(b.Runs))
	}
	return s, nil
}

// Spooled returns how many runs wait in the spool for the store: 0 unless the store is behind.
func (r *Recorder) Spooled() int64 {
	if r == nil || r.spool == nil {
		return 0
	}
	return r.spool.spooled.Load()
}

// Spools reports whether the recorder keeps runs in a spool while the store is away (it has a spool
// folder), rather than losing them.
func (r *Recorder) Spools() bool { return r != nil && r.spool != nil }

// behind reports whether batches wait in the spool: a new batch then goes after them.
func (r *Recorder) behind() bool { return r.spool != nil && r.spool.spooled.Load() > 0 }

// toSpool appends runs to the spool for the replay loop, in batches of at most BatchSize runs, all in
// one append synced once (group commit): whatever waited while the last append was syncing goes in the
// next one, so the spool keeps pace with the traffic however long one sync takes. Batches that do not
// fit (or that the disk refuses) are dropped and counted.
func (r *Recorder) toSpool(all []runs.Run, cause error) {
	if len(all) == 0 {
		return
	}
	s := r.spool
	bs := make([]sealed, 0, (len(all)+r.opts.BatchSize-1)/r.opts.BatchSize)
	var err error
	for rest := all; len(rest) > 0 && err == nil; {
		n := min(len(rest), r.opts.BatchSize)
		var body []byte
		for i := range rest[:n] {
			if body, err = runs.AppendLine(body, &rest[i]); err != nil {
				break
			}
		}
		if err == nil {
			bs = append(bs, sealed{ID: "rec-" + runs.NewID(time.Now()), Runs: n, Body: body})
		}
		rest = rest[n:]
	}
	kept := 0
	if len(bs) > 0 {
		var aerr error
		kept, aerr = s.disk.Append(bs)
		if err == nil {
			err = aerr
		}
	}
	written := 0
	if kept > 0 {
		s.mu.Lock()
		for _, b := range bs[:kept] {
			s.held = append(s.held, b)
			s.spooled.Add(int64(b.Runs))
			written += b.Runs
		}
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default:
		}
		if cause != nil && r.warnNow() {
			r.log.Warn("the store did not take a batch of runs: spooled until it answers", "runs", written, "spooled", s.spooled.Load(), "err", cause)
		}
	}
	if lost := len(all) - written; lost > 0 {
		if !errors.Is(err, spool.ErrFull) {
			r.spoolErrors.Add(1)
			r.spoolErrAt.Store(time.Now().UnixMilli())
		}
		r.drop(lost, "runs dropped: the recorder's spool cannot take them", err)
	}
}

// warnNow reports whether a minute has passed since the last spool warning, so that an outage logs
// once a minute, not once a batch.
func (r *Recorder) warnNow() bool {
	now := time.Now().UnixMilli()
	last := r.spool.lastWarn.Load()
	return now-last >= time.Minute.Milliseconds() && r.spool.lastWarn.CompareAndSwap(last, now)
}

// overflowLoop spools the runs that found the buffer full: the store is slower than the traffic (or
// stuck in a write), and the spool, an append to a file, keeps up where the store does not. Once a
// batch is spooled, the batches after it go there too (behind), until the replay has caught up.
func (r *Recorder) overflowLoop() {
	defer r.done.Done()
	ticker := time.NewTicker(r.opts.FlushInterval)
	defer ticker.Stop()
	var spare []runs.Run
	for {
		stopping := false
		select {
		case <-r.overflow.Ready():
		case <-ticker.C:
		case <-r.stop:
			stopping = true
		}
		spare = r.overflow.Take(spare)
		r.toSpool(spare, errSlowStore)
		if stopping {
			return
		}
	}
}

// errSlowStore is why runs that found the buffer full were spooled.
var errSlowStore = errors.New("the store is slower than the traffic: the recorder's buffer is full")

// replayLoop writes spooled batches back, oldest first, as soon as the store answers; after a failure it
// waits spool.retry before trying again.
func (r *Recorder) replayLoop() {
	defer r.done.Done()
	s := r.spool
	for {
		s.mu.Lock()
		n := len(s.held)
		var next sealed
		if n > 0 {
			next = s.held[0]
		}
		s.mu.Unlock()
		if n == 0 {
			select {
			case <-s.wake:
				continue
			case <-r.stop:
				return
			}
		}
		if err := r.replay(next); err != nil {
			if r.warnNow() {
				r.log.Warn("spooled runs not written yet: the store does not answer", "spooled", s.spooled.Load(), "err", err)
			}
			select {
			case <-time.After(s.retry):
				continue
			case <-r.stop:
				return
			}
		}
		s.disk.Ack(next.Loc)
		s.mu.Lock()
		s.held = s.held[1:]
		s.spooled.Add(-int64(next.Runs))
		s.mu.Unlock()
	}
}

// replay writes one spooled batch through Ingest, which applies a batch id once.
func (r *Recorder) replay(b sealed) error {
	body, err := r.spool.disk.Read(b.Loc)
	if err != nil {
		return err
	}
	var shipped []runs.Shipped
	lines := runs.NewLines(bytes.NewReader(body), len(body))
	for {
		line, err := lines.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var run runs.Run
		if err == nil {
			run, err = runs.DecodeRun(line)
		}
		if err != nil {
			// The record passed its checksum, so this is not a torn write: nothing can ever read it.
			r.failed.Add(int64(b.Runs))
			r.log.Error("spooled batch unreadable, set aside", "batch", b.ID, "runs", b.Runs, "err", err)
			return nil
		}
		shipped = append(shipped, runs.Shipped{ID: run.ID, Run: run})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.Ingest(ctx, &runs.Batch{ID: b.ID, Runs: runs.RunsOf(shipped)}, time.Now())
	if err != nil {
		return fmt.Errorf("replay batch %s: %w", b.ID, err)
	}
	if res.Rejected > 0 {
		r.failed.Add(int64(res.Rejected))
		r.log.Warn("spooled runs of deleted deployments not recorded", "batch", b.ID, "runs", res.Rejected)
	}
	return nil
}
