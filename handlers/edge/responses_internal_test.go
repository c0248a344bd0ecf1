package edge

import (
	"strings"
	"testing"
)

// The recent responses stay within their bounds, oldest out first.
func TestRecentResponsesBounds(t *testing.T) {
	var c recentResponses
	for i := 0; i < maxRecent+10; i++ {
		c.put("d", itoa(i), []byte("req"), []byte("resp"))
	}
	if len(c.order) != maxRecent || len(c.byKey) != maxRecent {
		t.Fatalf("%d kept", len(c.order))
	}
	if _, ok := c.get("d", "0"); ok {
		t.Error("the oldest was kept")
	}
	if turn, ok := c.get("d", itoa(maxRecent+9)); !ok || string(turn.Response) != "resp" {
		t.Error("the newest was not kept")
	}
	big := []byte(strings.Repeat("x", maxRecentBytes/3))
	for i := 0; i < 4; i++ {
		c.put("d", "big"+itoa(i), big, nil)
	}
	if c.bytes > maxRecentBytes {
		t.Errorf("%d bytes kept", c.bytes)
	}
	if _, ok := c.get("d", "big3"); !ok {
		t.Error("the newest big one was not kept")
	}
}
