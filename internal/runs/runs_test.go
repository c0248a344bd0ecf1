package runs

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ids made one after another in one millisecond sort in the order they were made (runs listed
// newest first keep their requests' order); ids are unique, also when made concurrently, and keep
// their form: run_, 11 hex digits of the millisecond, 10 base62 characters.
func TestNewIDOrderAndForm(t *testing.T) {
	latest.Store(0) // this process's newest id, which an earlier run of this test (-count) made later than at
	at := time.UnixMilli(1795708122000)
	var ids []string
	for i := 0; i < 500; i++ {
		ids = append(ids, NewID(at))
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids of one millisecond out of order: %v", ids[:5])
	}
	later := NewID(at.Add(time.Millisecond))
	if later <= ids[len(ids)-1] {
		t.Errorf("a later millisecond's id %s sorts before %s", later, ids[len(ids)-1])
	}
	if earlier := NewID(at); earlier >= later || !strings.HasPrefix(earlier, ids[0][:15]) {
		t.Errorf("an id of an earlier millisecond %s, after %s", earlier, later)
	}
	for _, id := range ids {
		if len(id) != 25 || !strings.HasPrefix(id, "run_") || strings.Trim(id[4:15], "0123456789abcdef") != "" ||
			strings.Trim(id[15:], base62) != "" {
			t.Fatalf("id %q is not run_ + 11 hex digits + 10 base62 characters", id)
		}
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1000; i++ { // past the 3,844 ordered ids of one millisecond
				id := NewID(at.Add(2 * time.Millisecond))
				mu.Lock()
				if seen[id] {
					t.Errorf("id %s made twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
