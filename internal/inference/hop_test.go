package inference

import (
	"net/http"
	"strings"
	"testing"
)

// Loop refuses a call that names this process or has made more than MaxHops hops; a call from another
// svc installation (a chain, not a loop) passes, and the header sent on names it and then this process.
func TestLoop(t *testing.T) {
	other := "0123456789abcdef"
	for _, tc := range []struct {
		name   string
		values []string
		loop   bool
	}{
		{"a caller", nil, false},
		{"another svc", []string{other}, false},
		{"back here", []string{other + ", " + hopID}, true},
		{"back here, header split", []string{other, hopID}, true},
		{"too many hops", []string{strings.Repeat(other+",", MaxHops) + other}, true},
		{"as many as allowed", []string{strings.Repeat(other+",", MaxHops-1) + other}, false},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add(HopHeader, v)
		}
		if got := Loop(h); got != tc.loop {
			t.Errorf("%s: Loop = %v, want %v", tc.name, got, tc.loop)
		}
	}
	if got := hops(other); got != other+", "+hopID || hops("") != hopID {
		t.Fatalf("hops sent on: %q", got)
	}
}
