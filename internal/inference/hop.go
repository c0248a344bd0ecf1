package inference

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strings"
)

// Loops: a model whose upstreamUrl points back at svc (an endpoint of its own, by mistake or through a
// proxy) would send each call around again until a connection cap stopped it, a run recorded each
// time. Every inference call svc sends upstream carries HopHeader: the hops it has made, each an svc
// process's id, this one's last. An edge refuses a call whose header already names it (508
// loop_detected, exchange's loop check), or that has made more than MaxHops hops, so that a call that
// comes back is answered at its second arrival. svc behind another svc installation (a chain, not a
// loop) is served as before.

// HopHeader lists the svc processes an inference call passed through, comma-separated.
const HopHeader = "Svc-Hop"

// MaxHops is how many svc processes one call may pass through.
const MaxHops = 8

// hopID is this process's id in HopHeader: random, so that two processes never share one.
var hopID = func() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}()

// hops is the HopHeader of a call sent upstream: the call's own hops (Call.Hops), then this process.
func hops(in string) string {
	if in == "" {
		return hopID
	}
	return in + ", " + hopID
}

// Loop reports whether an incoming call has already passed through this process, or through more than
// MaxHops svc processes: it came back by an upstreamUrl that points at svc.
func Loop(h http.Header) bool {
	vs := h.Values(HopHeader)
	if len(vs) == 0 {
		return false
	}
	n := 0
	for _, v := range vs {
		for id := range strings.SplitSeq(v, ",") {
			if n++; n > MaxHops || strings.TrimSpace(id) == hopID {
				return true
			}
		}
	}
	return false
}
