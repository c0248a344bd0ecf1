package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func gogc() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 1000},
		{2 * mib, 1000},  // a 2 MiB heap would need 3100: capped
		{8 * mib, 700},   // goal 64 MiB
		{20 * mib, 200},  // (64-20)/20 = 220 -> 200
		{32 * mib, 100},  // twice the live heap reaches the floor: Go's default
		{500 * mib, 100}, // large heaps keep the default
		{30 * mib, 100},  // 113 -> 100
		{6 * mib, 950},   // 966 -> 950
	} {
		if got := Percent(c.live, 64*mib); got != c.want {
			t.Errorf("Percent(%d MiB) = %d, want %d", c.live/mib, got, c.want)
		}
	}
}

// Started, the tuner raises GOGC for a small heap after collections; stopped, it restores the default.
func TestStartRaisesGOGCForSmallHeap(t *testing.T) {
	t.Setenv("GOGC", "100")
	os.Unsetenv("GOGC") // restored by t.Setenv's cleanup
	stop := Start(DefaultFloor)
	deadline := time.Now().Add(5 * time.Second)
	for gogc() != maxPercent {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("GOGC = %d after collections of a small heap, want %d", gogc(), maxPercent)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if gogc() != 100 {
		t.Fatalf("GOGC = %d after stop, want 100", gogc())
	}
}

// An operator's GOGC wins: the tuner does nothing.
func TestStartLeavesOperatorsGOGC(t *testing.T) {
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	defer debug.SetGCPercent(100)
	stop := Start(DefaultFloor)
	defer stop()
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	time.Sleep(20 * time.Millisecond) // on purpose: time for the tuner to act, were it to
	if gogc() != 150 {
		t.Fatalf("GOGC = %d with GOGC=150 in the environment, want 150", gogc())
	}
}
