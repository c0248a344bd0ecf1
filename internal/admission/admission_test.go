package admission

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// queued starts a call of key in lane l that waits for its turn, once the gate's waiting count shows it
// queued (so that calls queue in the order the test starts them); its key is sent on admitted when it
// gets its turn, or "refused:"+key when it does not.
func queued(t *testing.T, g *Gate, l Lane, key string, admitted chan<- string) {
	t.Helper()
	laneOf[key] = l
	before := g.waitingNow()
	go func() {
		_, err := g.Acquire(context.Background(), l, key)
		if err != nil {
			admitted <- "refused:" + key
			return
		}
		admitted <- key
	}()
	waitFor(t, func() bool { return g.waitingNow() > before }, "call of "+key+" queued")
}

func (g *Gate) waitingNow() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}

func (g *Gate) runningOf(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.keys[key].running
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// running is the key of the call in the model while order releases one call at a time.
var running string

// laneOf is the lane of the calls queued of each key (Interactive when none was).
var laneOf = map[string]Lane{}

// order releases one call at a time and returns the keys in the order they were admitted; each admitted
// call is released in turn, so exactly one call is in the model at any time.
func order(t *testing.T, g *Gate, admitted <-chan string, n int) []string {
	t.Helper()
	var out []string
	for range n {
		g.Release(laneOf[running], running, time.Millisecond)
		select {
		case k := <-admitted:
			out = append(out, k)
			running = k
		case <-time.After(5 * time.Second):
			t.Fatalf("no call admitted after a release; admitted so far %v", out)
		}
	}
	return out
}

// hold takes the gate's only slot so that the following calls wait.
func hold(t *testing.T, g *Gate) {
	t.Helper()
	if _, err := g.Acquire(context.Background(), Interactive, "holder"); err != nil {
		t.Fatal(err)
	}
	running = "holder"
}

func TestKeyBelowItsShareGoesFirst(t *testing.T) {
	// A short window: the margin A leaves B once B's calls end (TestFloodLeavesAMarginForAnotherKey)
	// lasts one or two of them.
	g := New(Config{Capacity: 4, Window: 20 * time.Millisecond})
	for _, k := range []string{"A", "A", "A", "B"} {
		if _, err := g.Acquire(context.Background(), Interactive, k); err != nil {
			t.Fatal(err)
		}
	}
	admitted := make(chan string, 8)
	queued(t, g, Interactive, "A", admitted)
	queued(t, g, Interactive, "A", admitted)
	queued(t, g, Interactive, "B", admitted)
	// A runs 3 calls, B 1: the slot A frees goes to B, although it is A's turn in the round.
	g.Release(Interactive, "A", time.Millisecond)
	if k := <-admitted; k != "B" {
		t.Fatalf("admitted %s, want B (1 call running against A's 2)", k)
	}
	g.Release(Interactive, "B", time.Millisecond)
	g.Release(Interactive, "B", time.Millisecond)
	if got := fmt.Sprint(<-admitted, <-admitted); got != "AA" {
		t.Fatalf("admitted %s", got)
	}
	if s, a, b := g.Stats(), g.runningOf("A"), g.runningOf("B"); s.InFlight != 4 || a != 4 || b != 0 {
		t.Fatalf("stats %+v, A running %d, B %d; want A's 4 calls in flight", s, a, b)
	}
}

func TestFloodingKeyGetsNoMoreThanItsTurn(t *testing.T) {
	g := New(Config{Capacity: 1, Timeout: time.Minute})
	hold(t, g)
	admitted := make(chan string, 32)
	for range 10 {
		queued(t, g, Interactive, "A", admitted)
	}
	// B arrives behind A's ten waiting calls, and again later: each of B's calls waits for at most one
	// of A's, whatever A has queued.
	queued(t, g, Interactive, "B", admitted)
	got := order(t, g, admitted, 2)
	queued(t, g, Interactive, "B", admitted)
	got = append(got, order(t, g, admitted, 10)...)
	want := "[A B A B A A A A A A A A]"
	if fmt.Sprint(got) != want {
		t.Fatalf("admitted %v, want %s", got, want)
	}
}

func TestKeysShareInTurnsByWeight(t *testing.T) {
	g := New(Config{Capacity: 1, Weight: func(k string) int {
		if k == "A" {
			return 2
		}
		return 1
	}})
	hold(t, g)
	admitted := make(chan string, 32)
	for range 4 {
		queued(t, g, Interactive, "A", admitted)
	}
	for range 4 {
		queued(t, g, Interactive, "B", admitted)
	}
	for range 2 {
		queued(t, g, Interactive, "C", admitted)
	}
	got := order(t, g, admitted, 10)
	if want := "[A A B C A A B C B B]"; fmt.Sprint(got) != want {
		t.Fatalf("admitted %v, want %s", got, want)
	}
}

func TestLanesAreServedInStrictPriority(t *testing.T) {
	g := New(Config{Capacity: 1})
	hold(t, g)
	admitted := make(chan string, 8)
	queued(t, g, Eval, "e1", admitted)
	queued(t, g, Shadow, "s1", admitted)
	queued(t, g, Eval, "e2", admitted)
	queued(t, g, Interactive, "i1", admitted)
	queued(t, g, Shadow, "s2", admitted)
	got := order(t, g, admitted, 2)
	queued(t, g, Interactive, "i2", admitted) // a caller's call arriving later still goes first
	got = append(got, order(t, g, admitted, 4)...)
	if want := "[i1 s1 i2 s2 e1 e2]"; fmt.Sprint(got) != want {
		t.Fatalf("admitted %v, want %s", got, want)
	}
}

func TestWaitEndsAtTimeoutWithBusy(t *testing.T) {
	g := New(Config{Capacity: 1, Timeout: 30 * time.Millisecond})
	hold(t, g)
	waited, err := g.Acquire(context.Background(), Interactive, "A")
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("err = %v, want ErrBusy", err)
	}
	if waited < 30*time.Millisecond {
		t.Fatalf("waited %v, want the whole timeout", waited)
	}
	if s := g.Stats(); s.Waiting[Interactive] != 0 || s.InFlight != 1 {
		t.Fatalf("stats after the timeout: %+v, want nobody waiting and the holder in flight", s)
	}
	// The slot is still the holder's; once released, a new call goes at once.
	g.Release(Interactive, "holder", time.Millisecond)
	if w, err := g.Acquire(context.Background(), Interactive, "A"); err != nil || w != 0 {
		t.Fatalf("Acquire after the release: waited %v, %v", w, err)
	}
}

func TestCallerWhoLeavesLeavesTheQueue(t *testing.T) {
	g := New(Config{Capacity: 1})
	hold(t, g)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := g.Acquire(ctx, Interactive, "A")
		errc <- err
	}()
	waitFor(t, func() bool { return g.waitingNow() == 1 }, "A queued")
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if n := g.waitingNow(); n != 0 {
		t.Fatalf("%d calls still waiting", n)
	}
	admitted := make(chan string, 1)
	queued(t, g, Interactive, "B", admitted)
	if got := order(t, g, admitted, 1); got[0] != "B" {
		t.Fatalf("admitted %v", got)
	}
}

func TestFullQueueTurnsAwayTheFloodNotTheOthers(t *testing.T) {
	g := New(Config{Capacity: 1, MaxWaiting: 4})
	hold(t, g)
	admitted := make(chan string, 16)
	for range 4 {
		queued(t, g, Interactive, "A", admitted)
	}
	// The queue is full of A's calls: B's call takes the place of A's newest, which is refused.
	before := g.waitingNow()
	go func() {
		if _, err := g.Acquire(context.Background(), Interactive, "B"); err == nil {
			admitted <- "B"
		}
	}()
	if got := <-admitted; got != "refused:A" {
		t.Fatalf("got %q, want A's newest call refused", got)
	}
	waitFor(t, func() bool { return g.waitingNow() == before }, "B queued in A's place")
	// A's fifth call finds the queue full and A holding its share: refused at once.
	if _, err := g.Acquire(context.Background(), Interactive, "A"); !errors.Is(err, ErrBusy) {
		t.Fatalf("A's call on a full queue: %v, want ErrBusy", err)
	}
	if got := order(t, g, admitted, 4); fmt.Sprint(got) != "[A B A A]" {
		t.Fatalf("admitted %v", got)
	}
}

func TestFullQueueMakesRoomFromLowerLanes(t *testing.T) {
	g := New(Config{Capacity: 1, MaxWaiting: 2})
	hold(t, g)
	admitted := make(chan string, 8)
	queued(t, g, Shadow, "s", admitted)
	queued(t, g, Interactive, "i", admitted)
	go func() {
		if _, err := g.Acquire(context.Background(), Interactive, "i"); err == nil {
			admitted <- "i2"
		}
	}()
	if got := <-admitted; got != "refused:s" {
		t.Fatalf("got %q, want the shadow call refused for the caller's", got)
	}
	waitFor(t, func() bool { return g.waitingNow() == 2 }, "i2 queued")
	if got := order(t, g, admitted, 2); fmt.Sprint(got) != "[i i2]" {
		t.Fatalf("admitted %v", got)
	}
}

func TestCapacityChangesAdmitWaitingCalls(t *testing.T) {
	g := New(Config{Capacity: 1})
	hold(t, g)
	admitted := make(chan string, 8)
	queued(t, g, Interactive, "A", admitted)
	queued(t, g, Interactive, "B", admitted)
	queued(t, g, Interactive, "C", admitted)
	g.SetCapacity(3) // two more replicas became healthy
	got := map[string]bool{<-admitted: true, <-admitted: true}
	if !got["A"] || !got["B"] {
		t.Fatalf("admitted %v, want A and B", got)
	}
	g.SetCapacity(0) // no bound: whoever waits goes
	if k := <-admitted; k != "C" {
		t.Fatalf("admitted %q, want C", k)
	}
	if s := g.Stats(); s.InFlight != 4 {
		t.Fatalf("in flight %d, want 4", s.InFlight)
	}
}

func TestRetryAfterFollowsTheQueue(t *testing.T) {
	g := New(Config{Capacity: 1})
	if d := g.RetryAfter(); d != time.Second {
		t.Fatalf("idle: %v, want the 1 s floor", d)
	}
	for range 64 {
		hold(t, g)
		g.Release(Interactive, "holder", 4*time.Second)
	}
	if d := g.RetryAfter(); d < 3*time.Second || d > 4*time.Second {
		t.Fatalf("after 4 s calls: %v, want about 4 s", d)
	}
}

// BenchmarkAcquireRelease is the decision when nothing waits: the cost every call pays with admission
// on (≤ 2 µs and no allocation, docs/OPERATIONS.md "Admission").
func BenchmarkAcquireRelease(b *testing.B) {
	g := New(Config{Capacity: 1 << 20})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := g.Acquire(ctx, Interactive, "key"); err != nil {
			b.Fatal(err)
		}
		g.Release(Interactive, "key", time.Millisecond)
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	g := New(Config{Capacity: 1 << 20})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := g.Acquire(ctx, Interactive, "key"); err != nil {
				b.Fatal(err)
			}
			g.Release(Interactive, "key", time.Millisecond)
		}
	})
}

// TestDecisionAllocatesNothing holds the benchmark's promise in the ordinary test run.
func TestDecisionAllocatesNothing(t *testing.T) {
	g := New(Config{Capacity: 4})
	ctx := context.Background()
	n := testing.AllocsPerRun(1000, func() {
		if _, err := g.Acquire(ctx, Interactive, "key"); err != nil {
			t.Fatal(err)
		}
		g.Release(Interactive, "key", time.Millisecond)
	})
	if n != 0 {
		t.Fatalf("%v allocations per decision, want 0", n)
	}
}

// While a caller is about, copies and replays never take the callers' reserve (an eighth of the
// capacity, one place at least): with an eval filling what it may, a caller's call is admitted at once,
// and a place a caller frees goes back to the eval only below the reserve.
func TestCallersKeepAReserveFromLowerLanes(t *testing.T) {
	g := New(Config{Capacity: 16, Window: time.Minute})
	// A caller called a moment ago: the reserve is theirs for a window or two.
	if _, err := g.Acquire(context.Background(), Interactive, "C"); err != nil {
		t.Fatal(err)
	}
	g.Release(Interactive, "C", time.Millisecond)
	for range 14 {
		if _, err := g.Acquire(context.Background(), Eval, "eval"); err != nil {
			t.Fatal(err)
		}
	}
	admitted := make(chan string, 4)
	queued(t, g, Eval, "eval", admitted) // the 15th would leave callers fewer than 2 places
	queued(t, g, Shadow, "copy", admitted)
	for _, k := range []string{"A", "B"} {
		if waited, err := g.Acquire(context.Background(), Interactive, k); err != nil || waited != 0 {
			t.Fatalf("caller %s: waited %v, %v; want admitted at once", k, waited, err)
		}
	}
	if s := g.Stats(); s.InFlight != 16 || s.Waiting[Eval] != 1 || s.Waiting[Shadow] != 1 {
		t.Fatalf("stats %+v, want 16 in flight, the copy and the replay waiting", s)
	}
	g.Release(Interactive, "A", time.Millisecond)
	g.Release(Interactive, "B", time.Millisecond) // 14 in flight: the reserve is whole again, nothing admitted
	if s := g.Stats(); s.InFlight != 14 {
		t.Fatalf("in flight %d after the callers left, want 14 (the lower lanes wait out the reserve)", s.InFlight)
	}
	g.Release(Eval, "eval", time.Millisecond) // 13: one place below the reserve, the copy goes first
	if got := <-admitted; got != "copy" {
		t.Fatalf("admitted %q, want the shadow copy before the replay", got)
	}
}

// Beside callers the lower lanes keep one more place free for each caller's call in flight: with 4
// callers running on a capacity of 16, replays hold at most 16 - 2 (the reserve) - 2×4 = 6 places, and
// take more as the callers end; with 13 callers, still one.
func TestLowerLanesGiveWayToCallersInFlight(t *testing.T) {
	// (The callers in flight are about: the reserve stays theirs however long the test takes.)
	g := New(Config{Capacity: 16})
	for range 4 {
		if _, err := g.Acquire(context.Background(), Interactive, "caller"); err != nil {
			t.Fatal(err)
		}
	}
	for range 12 {
		go g.Acquire(context.Background(), Eval, "eval")
	}
	waitFor(t, func() bool { s := g.Stats(); return s.InFlight+s.Waiting[Eval] == 16 }, "12 replays arrived")
	if s := g.Stats(); s.InFlight != 10 || s.Waiting[Eval] != 6 {
		t.Fatalf("stats %+v, want 4 callers and 6 replays in flight, 6 replays waiting", s)
	}
	for range 2 {
		g.Release(Interactive, "caller", time.Millisecond)
	}
	if s := g.Stats(); s.InFlight != 12 || s.Waiting[Eval] != 2 {
		t.Fatalf("stats %+v after 2 callers ended, want 2 callers and 10 replays in flight", s)
	}

	g = New(Config{Capacity: 16})
	for range 13 {
		g.Acquire(context.Background(), Interactive, "caller")
	}
	for range 2 {
		go g.Acquire(context.Background(), Eval, "eval")
	}
	waitFor(t, func() bool { s := g.Stats(); return s.InFlight+s.Waiting[Eval] == 15 }, "2 replays arrived")
	if s := g.Stats(); s.InFlight != 14 {
		t.Fatalf("stats %+v beside 13 callers, want one replay going", s)
	}
}

// A key at or above its fair share leaves each other key active of late its peak plus one: key B ran 2
// calls a moment ago, so key A's flood takes 5 of 8 places (8 - (2 + 1), above its half), and B's next
// three calls go at once while A's excess waits, then gets ErrBusy. Weights count: a key of weight 3
// beside one of weight 1 is held at its fair share, 6 of 8, however large the other's margin.
func TestFloodLeavesAMarginForAnotherKey(t *testing.T) {
	ctx := context.Background()
	g := New(Config{Capacity: 8, Timeout: 500 * time.Millisecond, Window: time.Minute})
	for range 2 {
		g.Acquire(ctx, Interactive, "B")
	}
	for range 2 {
		g.Release(Interactive, "B", time.Millisecond)
	}
	for i := range 5 {
		if waited, err := g.Acquire(ctx, Interactive, "A"); err != nil || waited != 0 {
			t.Fatalf("A's call %d: waited %v, %v; want admitted at once", i+1, waited, err)
		}
	}
	admitted := make(chan string, 4)
	queued(t, g, Interactive, "A", admitted) // A's sixth would take B's margin
	if s := g.Stats(); s.InFlight != 5 {
		t.Fatalf("stats %+v, want A's 5 calls in flight and its sixth waiting", s)
	}
	for i := range 3 {
		if _, err := g.Acquire(ctx, Interactive, "B"); err != nil {
			t.Fatalf("B's call %d beside A's flood: %v, want admitted at once", i+1, err)
		}
	}
	if s, a := g.Stats(), g.runningOf("A"); s.InFlight != 8 || a != 5 {
		t.Fatalf("stats %+v, A running %d; want 8 in flight, A 5 and B 3", s, a)
	}
	if got := <-admitted; got != "refused:A" {
		t.Fatalf("A's sixth call: %q, want refused at its timeout", got)
	}

	g = New(Config{Capacity: 8, Window: time.Minute, Weight: func(k string) int { return map[string]int{"A": 3}[k] }})
	for range 4 {
		g.Acquire(ctx, Interactive, "B")
	}
	for range 4 {
		g.Release(Interactive, "B", time.Millisecond)
	}
	for i := range 6 {
		if waited, err := g.Acquire(ctx, Interactive, "A"); err != nil || waited != 0 {
			t.Fatalf("A's call %d (weight 3 of 4): waited %v, %v; want admitted at once", i+1, waited, err)
		}
	}
	queued(t, g, Interactive, "A", admitted)
	if s := g.Stats(); s.InFlight != 6 {
		t.Fatalf("stats %+v, want A at its fair share of 6 and its seventh waiting", s)
	}
}

// The margin lasts while the other key calls: once B has been quiet for a window or two, A's waiting
// calls take the free places, though no call ends or arrives meanwhile.
func TestMarginEndsWhenTheOtherKeyGoesQuiet(t *testing.T) {
	g := New(Config{Capacity: 8, Window: 20 * time.Millisecond})
	for range 2 {
		g.Acquire(context.Background(), Interactive, "B")
	}
	for range 2 {
		g.Release(Interactive, "B", time.Millisecond)
	}
	for range 8 {
		go g.Acquire(context.Background(), Interactive, "A")
	}
	waitFor(t, func() bool { s := g.Stats(); return s.InFlight == 8 && s.Waiting[Interactive] == 0 }, "A's 8 calls in flight")
}

// With no caller about (none in flight, none admitted for a window or two) the lower lanes may use the
// callers' reserve too: a replay alone fills the whole capacity. A caller who comes then takes the next
// place freed, before the replays waiting, and the reserve is the callers' again.
func TestReserveLentWhileNoCallerIsAbout(t *testing.T) {
	const window, lendAfter = 20 * time.Millisecond, 10
	g := New(Config{Capacity: 16, Window: window, LendAfter: lendAfter})
	g.Acquire(context.Background(), Interactive, "C")
	g.Release(Interactive, "C", time.Millisecond)
	gone := time.Now()
	for range 16 {
		go g.Acquire(context.Background(), Eval, "eval")
	}
	waitFor(t, func() bool { s := g.Stats(); return s.InFlight == 14 || s.InFlight == 16 }, "the replay taking its places")
	waitFor(t, func() bool { s := g.Stats(); return s.InFlight == 16 }, "the replay using all 16 places")
	// Not before C's key is no longer active (one window at least) and LendAfter windows more have passed.
	if took := time.Since(gone); took < (lendAfter+1)*window {
		t.Fatalf("the reserve was lent %v after the caller's call, want %v at least", took, (lendAfter+1)*window)
	}
	admitted := make(chan string, 4)
	queued(t, g, Eval, "eval", admitted)
	queued(t, g, Interactive, "A", admitted)
	g.Release(Eval, "eval", time.Millisecond)
	if got := <-admitted; got != "A" {
		t.Fatalf("admitted %q, want the caller before the waiting replay", got)
	}
	g.Release(Eval, "eval", time.Millisecond)
	// 15 in flight, one a caller's: the replays may hold min(14, max(14-1, 1+1)) = 13 beside it.
	if s := g.Stats(); s.InFlight != 15 || s.Waiting[Eval] != 1 {
		t.Fatalf("stats %+v, want 15 in flight and the replay still waiting (the reserve is the callers' again)", s)
	}
}

// borrow admits n calls of lane l with a loan each, at once, and returns their loans and how many
// times each was asked to yield.
func borrow(t *testing.T, g *Gate, l Lane, key string, n int) ([]*Loan, []*int) {
	t.Helper()
	loans, yields := make([]*Loan, n), make([]*int, n)
	for i := range n {
		y := new(int)
		loans[i], yields[i] = NewLoan(func() { *y++ }), y
		if waited, err := g.AcquireCall(context.Background(), Call{Lane: l, Key: key, Loan: loans[i]}); err != nil || waited != 0 {
			t.Fatalf("%s call %d: waited %v, %v; want admitted at once", l, i, waited, err)
		}
	}
	return loans, yields
}

// With no caller about the reserve is lent to the lower lanes; a caller who then finds every place
// taken does not wait for a replay's call to end: the youngest borrower (the last admitted, in the
// reserve) is asked to yield and the caller goes at once. A second caller takes the other borrowed
// place; a third waits, for nothing else is borrowed. The yielded calls count in flight until they
// release (16 + 2 at most: the reserve), and the lower lanes then wait out the reserve again.
func TestCallerTakesBackABorrowedPlace(t *testing.T) {
	g := New(Config{Capacity: 16, Window: time.Minute, Timeout: 5 * time.Second})
	loans, yields := borrow(t, g, Eval, "eval", 16)
	for i, l := range loans {
		if borrowed := l.at >= 0; borrowed != (i >= 14) {
			t.Fatalf("replay %d borrowed %v, want only the 15th and 16th in the reserve", i, borrowed)
		}
	}
	for _, k := range []string{"A", "B"} {
		if waited, err := g.Acquire(context.Background(), Interactive, k); err != nil || waited != 0 {
			t.Fatalf("caller %s: waited %v, %v; want admitted at once", k, waited, err)
		}
	}
	for i, y := range yields {
		if want := map[bool]int{true: 1}[i >= 14]; *y != want || loans[i].Yielded() != (want == 1) {
			t.Fatalf("replay %d asked to yield %d times, want %d (the borrowers, youngest first)", i, *y, want)
		}
	}
	if s := g.Stats(); s.InFlight != 18 {
		t.Fatalf("in flight %d, want 18: 16 replays (2 yielding) and 2 callers", s.InFlight)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx, Interactive, "C"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("third caller: %v, want it kept waiting (nothing else borrowed)", err)
	}
	for _, i := range []int{15, 14} {
		g.ReleaseCall(Call{Lane: Eval, Key: "eval", Loan: loans[i]}, time.Millisecond)
	}
	if s := g.Stats(); s.InFlight != 16 || g.yielding != 0 || len(g.loans) != 0 {
		t.Fatalf("after the yielded calls released: %+v, yielding %d, loans %d; want 16, 0, 0", s, g.yielding, len(g.loans))
	}
}

// A caller who finds every place taken by calls within the lower lanes' normal limit and by callers
// waits: nothing is borrowed, nothing yields; callers' own places never do.
func TestNoYieldWithoutABorrowedPlace(t *testing.T) {
	g := New(Config{Capacity: 16, Window: time.Minute, Timeout: 5 * time.Second})
	_, yields := borrow(t, g, Eval, "eval", 14)
	for range 2 {
		if _, err := g.Acquire(context.Background(), Interactive, "A"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.Acquire(ctx, Interactive, "B"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("caller B: %v, want it kept waiting", err)
	}
	for i, y := range yields {
		if *y != 0 {
			t.Fatalf("replay %d asked to yield within the lower lanes' normal limit", i)
		}
	}

	// Callers fill the gate, then a copy's borrowed place is taken back by a waiting caller when it
	// is its turn: only the copy yields, never a caller's call.
	g = New(Config{Capacity: 8, Window: time.Minute, Timeout: 5 * time.Second})
	_, yields = borrow(t, g, Shadow, "copy", 8) // no caller about: the 8th borrows
	admitted := make(chan string, 1)
	for range 7 {
		g.Release(Shadow, "copy", time.Millisecond) // copies 0-6 end (they were not borrowed)
	}
	for range 7 {
		if _, err := g.Acquire(context.Background(), Interactive, "A"); err != nil {
			t.Fatal(err)
		}
	}
	if *yields[7] != 0 {
		t.Fatal("the borrower yielded though a place was free")
	}
	if waited, err := g.Acquire(context.Background(), Interactive, "B"); err != nil || waited != 0 {
		t.Fatalf("caller B: waited %v, %v; want the borrowed place at once", waited, err)
	}
	if *yields[7] != 1 {
		t.Fatalf("the borrowing copy asked to yield %d times, want 1", *yields[7])
	}
	queued(t, g, Interactive, "C", admitted)
	select {
	case k := <-admitted:
		t.Fatalf("caller %s admitted with every place a caller's", k)
	case <-time.After(50 * time.Millisecond):
	}
}
