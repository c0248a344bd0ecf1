package ratelimit

import (
	"testing"
	"time"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestBucketsRefuseBeyondBurstAndRefill(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	b := NewBuckets(3, time.Minute, c.now)
	for i := 0; i < 3; i++ {
		if ok, _ := b.Take("a"); !ok {
			t.Fatalf("take %d refused within the burst", i+1)
		}
	}
	ok, retry := b.Take("a")
	if ok || retry <= 0 || retry > time.Minute {
		t.Fatalf("4th take: ok=%v retry=%v, want refused with 0 < retry <= 1m", ok, retry)
	}
	if ok, _ := b.Take("b"); !ok {
		t.Fatal("another key shares the first key's bucket")
	}
	c.t = c.t.Add(retry)
	if ok, _ := b.Take("a"); !ok {
		t.Fatal("refused after waiting the announced Retry-After")
	}
}

func TestBackoffGrowsAfterFreeFailuresAndResets(t *testing.T) {
	c := &fakeClock{t: time.Unix(1000, 0)}
	b := NewBackoff(2, time.Second, 8*time.Second, time.Hour, c.now)
	if b.Fail("k") != 0 || b.Fail("k") != 0 {
		t.Fatal("the free failures imposed a wait")
	}
	var waits []time.Duration
	for i := 0; i < 5; i++ {
		waits = append(waits, b.Fail("k"))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits = %v, want %v", waits, want)
		}
	}
	if b.Wait("k") != 8*time.Second {
		t.Fatalf("Wait = %v, want 8s", b.Wait("k"))
	}
	c.t = c.t.Add(8 * time.Second)
	if b.Wait("k") != 0 {
		t.Fatal("still waiting after the delay passed")
	}
	b.Reset("k")
	if b.Fail("k") != 0 {
		t.Fatal("a reset key still pays for earlier failures")
	}
	c.t = c.t.Add(2 * time.Hour)
	b.Fail("k")
	if b.Fail("k") != 0 {
		t.Fatal("failures older than Forget still count")
	}
}
