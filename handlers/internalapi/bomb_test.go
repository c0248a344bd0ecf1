package internalapi_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgewire"
)

// bomb returns a gzipped body: a batch whose one run's request is a single JSON string of n bytes
// (n a multiple of 1 KiB), or, with zeros, n zero bytes. It is a multi-member gzip stream (which gzip
// readers read as one, as RFC 1952 allows): one member compressed once and repeated, so that making
// a 1 GiB bomb costs the test nothing.
func bomb(n int, zeros bool) []byte {
	member := func(data []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(data)
		zw.Close()
		return buf.Bytes()
	}
	fill := byte('a')
	if zeros {
		fill = 0
	}
	var out bytes.Buffer
	if !zeros {
		out.Write(member([]byte(`{"batchId":"bomb","runs":[{"id":"run_bomb","deploymentId":"dep_x","status":"ok","createdAt":"2026-11-26T18:00:00Z","request":"`)))
	}
	mib, kib := member(bytes.Repeat([]byte{fill}, 1<<20)), member(bytes.Repeat([]byte{fill}, 1<<10))
	for left := n; left > 0; {
		if left >= 1<<20 {
			out.Write(mib)
			left -= 1 << 20
		} else {
			out.Write(kib)
			left -= 1 << 10
		}
	}
	if !zeros {
		out.Write(member([]byte(`","response":"{}"}]}`)))
	}
	return out.Bytes()
}

// heapOf posts body and returns the peak heap in use above the level before it (sampled every
// millisecond) and the bytes allocated meanwhile, with the answer's status and body.
func heapOf(e *env, body []byte) (peak, alloc uint64, status int, answer string) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var top atomic.Uint64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > top.Load() {
				top.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	resp, answer := e.do("POST", edgewire.RunsPath, e.token, body, map[string]string{"Content-Encoding": "gzip"})
	close(stop)
	<-done
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if t := top.Load(); t > before.HeapAlloc {
		peak = t - before.HeapAlloc
	}
	return peak, after.TotalAlloc - before.TotalAlloc, resp.StatusCode, answer
}

// A gzip bomb to the internal API costs bounded memory: one run that inflates to a 63 MiB JSON string
// (62 KiB gzipped) is refused with a 413 naming the cap on one run, holding at most a few times that
// cap (before the cap on one run: 222 MiB of heap at its peak, 263 MiB allocated), four at once
// likewise; a run just under the cap is still taken; 1 GiB of zeros is a 400 at once.
func TestGzipBombCostsBoundedMemory(t *testing.T) {
	e := newEnv(t)
	const bound = 64 << 20 // heap above the level before, at the peak: the decoder's buffer, the string and its copies

	body := bomb(63<<20, false)
	peak, alloc, status, answer := heapOf(e, body)
	t.Logf("one 63 MiB JSON string (%d KiB gzipped): %d; peak heap +%d MiB, allocated %d MiB", len(body)>>10, status, peak>>20, alloc>>20)
	envelope(t, "a run past the cap", status, answer, 413, "body_too_large")
	if !strings.Contains(answer, fmt.Sprintf("%d MiB", edgewire.MaxRunBytes>>20)) {
		t.Fatalf("the 413 does not name the cap on one run: %s", answer)
	}
	if peak > bound {
		t.Fatalf("one gzip bomb took %d MiB of heap at its peak, want at most %d", peak>>20, bound>>20)
	}

	// Four at once.
	var wg sync.WaitGroup
	var statuses [4]int
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var top atomic.Uint64
	stop := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > top.Load() {
				top.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := e.do("POST", edgewire.RunsPath, e.token, body, map[string]string{"Content-Encoding": "gzip"})
			statuses[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	close(stop)
	four := top.Load() - min(top.Load(), before.HeapAlloc)
	t.Logf("four at once: %v; peak heap +%d MiB", statuses, four>>20)
	if statuses != [4]int{413, 413, 413, 413} || four > 4*bound {
		t.Fatalf("four gzip bombs at once: %v, %d MiB of heap at the peak", statuses, four>>20)
	}

	// Just under the cap, a run is taken (its deployment is unknown here, so it is counted as rejected).
	body = bomb(edgewire.MaxRunBytes-1<<10, false)
	peak, alloc, status, answer = heapOf(e, body)
	t.Logf("one %d MiB JSON string: %d; peak heap +%d MiB, allocated %d MiB", edgewire.MaxRunBytes>>20, status, peak>>20, alloc>>20)
	if status != 200 || !strings.Contains(answer, `"rejected":1`) {
		t.Fatalf("a run under the cap: %d %s", status, answer)
	}

	body = bomb(1<<30, true)
	peak, alloc, status, answer = heapOf(e, body)
	t.Logf("1 GiB of zeros (%d KiB gzipped): %d; peak heap +%d MiB, allocated %d MiB", len(body)>>10, status, peak>>20, alloc>>20)
	envelope(t, "1 GiB of zeros", status, answer, 400, "invalid_request")
}
