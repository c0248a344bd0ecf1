package ratelimit

import (
	"testing"
	"time"
)

// TestTableStaysBounded: a new key at the bound first drops the idle entries; when none is idle, half
// of the table goes, so that a flood of fresh keys never grows a limiter past maxKeys.
func TestTableStaysBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	idleBefore := now.Add(-time.Hour)
	tb := newTable[int](func(last time.Time, now time.Time) bool { return now.Sub(last) >= time.Hour })
	for i := range maxKeys {
		last := now
		if i%4 == 0 {
			last = idleBefore // a quarter of the keys are idle
		}
		tb.put(i, last, now)
	}
	tb.put(-1, now, now)
	if got, want := len(tb.m), maxKeys-maxKeys/4+1; got != want {
		t.Fatalf("after a put at the bound with idle keys: %d entries, want %d (only the idle ones dropped)", got, want)
	}
	if _, ok := tb.m[1]; !ok {
		t.Fatal("a busy key was dropped while idle ones could go")
	}
	for i := 0; len(tb.m) < maxKeys; i++ {
		tb.put(maxKeys+i, now, now)
	}
	tb.put(-2, now, now)
	if got := len(tb.m); got > maxKeys/2+1 || got < maxKeys/2 {
		t.Fatalf("after a put at the bound with no idle key: %d entries, want about half of %d", got, maxKeys)
	}
	if _, ok := tb.m[-2]; !ok {
		t.Fatal("the new key was not stored")
	}
	tb.put(-2, now, now) // an existing key never prunes
	if got := len(tb.m); got > maxKeys/2+1 {
		t.Fatalf("re-putting a key changed the size to %d", got)
	}
}
