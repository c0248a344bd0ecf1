// Package poll is for tests: it waits for a condition a test can observe, checking it every 10 ms up
// to a bound, instead of sleeping a fixed time and hoping the condition holds by then.
package poll

import (
	"testing"
	"time"
)

// Every is how often Until checks its condition.
const Every = 10 * time.Millisecond

// Until checks cond every 10 ms until it holds, and returns how long that took; when it still does
// not hold after within, the test fails, saying what was awaited.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not after %v", what, within)
		}
		time.Sleep(Every)
	}
	return time.Since(start)
}
