package ratelimit

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/poll"
	"github.com/svcdev/svc/internal/redistest"
)

func TestBudgetBoundsAreUTCPeriods(t *testing.T) {
	at := time.Date(2026, 12, 31, 23, 30, 0, 0, time.FixedZone("x", -5*3600)) // 2027-01-01 04:30 UTC
	s, e := Budget{Tokens: 1, Period: PeriodDay}.Bounds(at)
	if !s.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) || !e.Equal(time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("day: %v .. %v", s, e)
	}
	s, e = Budget{Tokens: 1, Period: PeriodMonth}.Bounds(time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC))
	if !s.Equal(time.Date(2028, 2, 1, 0, 0, 0, 0, time.UTC)) || !e.Equal(time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("month: %v .. %v", s, e)
	}
}

// A budget admits calls while anything is left, reserving each call's tokens; the settle gives back
// what a call did not use; past the budget the call is refused with the period's end, and the next
// period starts at zero.
func TestBudgetReserveSettleLocal(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	b := NewBudgets(nil, 1)
	b.now = func() time.Time { return now }
	key := BudgetScope{Name: "key", ID: "k1", Budget: Budget{Tokens: 100, Period: PeriodDay}}
	dep := BudgetScope{Name: "deployment", ID: "d1"} // no budget
	r1, d := b.Reserve(60, dep, key)
	if !d.Allowed {
		t.Fatalf("first call refused: %+v", d)
	}
	b.Settle(r1, 30) // 30 used
	r2, d := b.Reserve(60, dep, key)
	if !d.Allowed {
		t.Fatalf("second call refused at 30 used: %+v", d)
	}
	b.Settle(r2, 80) // 110 used: past the budget by one call
	if _, d = b.Reserve(1, dep, key); d.Allowed || d.Refused != "key" || !d.ResetsAt.Equal(time.Date(2026, 5, 11, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("spent budget: %+v", d)
	}
	now = now.Add(12 * time.Hour)
	if _, d = b.Reserve(1, dep, key); !d.Allowed {
		t.Fatalf("next day refused: %+v", d)
	}
}

// Without Redis each of two edges counts half the budget.
func TestBudgetShareLocal(t *testing.T) {
	b := NewBudgets(nil, 2)
	key := BudgetScope{Name: "key", ID: "k1", Budget: Budget{Tokens: 100, Period: PeriodMonth}}
	granted := 0
	for i := 0; i < 20; i++ {
		r, d := b.Reserve(10, key)
		if d.Allowed {
			b.Settle(r, 10)
			granted += 10
		}
	}
	if granted != 50 {
		t.Fatalf("one edge of two granted %d tokens of a 100 budget, want its share 50", granted)
	}
}

// With Redis two processes share one count: concurrent calls are granted at most the budget plus one
// call's reservation, whichever process they reach; refusals name the period's end on Redis's clock.
func TestBudgetSharedThroughRedis(t *testing.T) {
	srv := redistest.Start(t)
	a := NewBudgets(newTestRedis(t, srv.URL, nil), 2)
	c := NewBudgets(newTestRedis(t, srv.URL, nil), 2)
	key := BudgetScope{Name: "key", ID: "k1", Budget: Budget{Tokens: 1000, Period: PeriodDay}}
	var granted, refused atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			bs := a
			if w%2 == 1 {
				bs = c
			}
			for i := 0; i < 20; i++ {
				r, d := bs.Reserve(50, key)
				if !d.Allowed {
					refused.Add(1)
					if _, end := key.Budget.Bounds(time.Now()); !d.ResetsAt.Equal(end) {
						t.Errorf("reset %v, want %v", d.ResetsAt, end)
					}
					continue
				}
				bs.Settle(r, 40)
				granted.Add(40)
			}
		}(w)
	}
	wg.Wait()
	if g := granted.Load(); g < 1000-50 || g > 1000+50 {
		t.Fatalf("granted %d tokens of a 1000 budget across two processes (refused %d), want 1000 within one call", g, refused.Load())
	}
	if a.shared.Fallbacks("budget") != 0 {
		t.Fatal("decided locally")
	}
}

// BenchmarkBudgetLocal is what a budget costs a call in a process without Redis: one reserve at
// admission and one settle at the end.
func BenchmarkBudgetLocal(b *testing.B) {
	bs := NewBudgets(nil, 1)
	key := BudgetScope{Name: "key", ID: "k1", Budget: Budget{Tokens: 1 << 60, Period: PeriodDay}}
	b.ReportAllocs()
	for b.Loop() {
		r, _ := bs.Reserve(100, key)
		bs.Settle(r, 90)
	}
}

// BenchmarkBudgetShared is the same counted in a real redis-server on loopback: two scripts a call.
func BenchmarkBudgetShared(b *testing.B) {
	srv := redistest.Start(b)
	r, err := NewRedis(RedisOptions{URL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	bs := NewBudgets(r, 1)
	key := BudgetScope{Name: "key", ID: "k1", Budget: Budget{Tokens: 1 << 60, Period: PeriodDay}}
	b.ReportAllocs()
	for b.Loop() {
		res, _ := bs.Reserve(100, key)
		bs.Settle(res, 90)
	}
}

// The calls that open a budget's period together read what it used before once, not once each: the
// first reads it, the others wait for its answer and start from it.
func TestBudgetSeededOnceByConcurrentCalls(t *testing.T) {
	b := NewBudgets(nil, 1)
	var reads atomic.Int32
	release := make(chan struct{})
	b.Seed = func(BudgetScope, time.Time, time.Time) int64 {
		reads.Add(1)
		<-release
		return 90
	}
	key := BudgetScope{Name: "key", ID: "k1", Budget: Budget{Tokens: 100, Period: PeriodDay}}
	var wg sync.WaitGroup
	var allowed atomic.Int32
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, d := b.Reserve(5, key); d.Allowed {
				allowed.Add(1)
			}
		}()
	}
	poll.Until(t, 5*time.Second, "the first call reading the store", func() bool { return reads.Load() > 0 })
	time.Sleep(50 * time.Millisecond) // the others arrive meanwhile (and would read it too)
	close(release)
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("the store was read %d times for one budget's period, want once", n)
	}
	if n := allowed.Load(); n != 2 { // 90 used before: two calls of 5 fit in 100
		t.Fatalf("%d calls allowed, want 2 (each started from the 90 read)", n)
	}
}
