package batchq

import (
	"sync"
	"testing"
	"time"
)

func TestPutTakeInOrderAndBounded(t *testing.T) {
	q := New[int](3, 2)
	for i := 1; i <= 4; i++ {
		if ok := q.Put(i); ok != (i <= 3) {
			t.Fatalf("Put(%d) = %v with limit 3", i, ok)
		}
	}
	if q.Len() != 3 {
		t.Fatalf("Len = %d, want 3", q.Len())
	}
	got := q.Take(nil)
	if len(got) != 3 || got[0] != 1 || got[2] != 3 || q.Len() != 0 {
		t.Fatalf("Take = %v, Len %d", got, q.Len())
	}
	if !q.Put(5) {
		t.Fatal("Put after Take refused")
	}
	if got := q.Take(got); len(got) != 1 || got[0] != 5 {
		t.Fatalf("second Take = %v", got)
	}
}

func TestReadyWhenABatchIsQueued(t *testing.T) {
	q := New[int](100, 3)
	q.Put(1)
	q.Put(2)
	select {
	case <-q.Ready():
		t.Fatal("Ready before a batch was queued")
	default:
	}
	q.Put(3)
	select {
	case <-q.Ready():
	case <-time.After(time.Second):
		t.Fatal("no Ready after a batch was queued")
	}
}

// Items put from many goroutines are all taken exactly once by a consumer that takes them as they come.
func TestConcurrentPutsTakenOnce(t *testing.T) {
	q := New[int](1<<20, 64)
	const producers, each = 8, 5000
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				q.Put(p*each + i)
			}
		}(p)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := make([]bool, producers*each)
	var a, b []int
	for finished := false; !finished; {
		select {
		case <-q.Ready():
		case <-done:
			finished = true
		case <-time.After(time.Millisecond):
		}
		a, b = q.Take(b), a
		for _, v := range a {
			if seen[v] {
				t.Fatalf("%d taken twice", v)
			}
			seen[v] = true
		}
	}
	for v, ok := range seen {
		if !ok {
			t.Fatalf("%d never taken", v)
		}
	}
}
