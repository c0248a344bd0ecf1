//go:build linux

package bench

import (
	"os"
	"testing"
	"time"
)

// TestMachineCPU: the machine's busy time grows by at least the CPU time this process spent meanwhile
// (spinning), and never by more than the CPUs' time in all.
func TestMachineCPU(t *testing.T) {
	busy0, total0, ok0 := MachineCPU()
	own0, okOwn0 := CPUTime(os.Getpid())
	if !ok0 || !okOwn0 {
		t.Fatal("/proc/stat or /proc/self/stat unreadable")
	}
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	busy1, total1, _ := MachineCPU()
	own1, _ := CPUTime(os.Getpid())
	busy, total, own := busy1-busy0, total1-total0, own1-own0
	if busy < own-2*clockTick || busy > total {
		t.Errorf("machine busy %v of %v while this process spent %v", busy, total, own)
	}
}
