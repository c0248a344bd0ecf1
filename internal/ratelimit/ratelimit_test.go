package ratelimit

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// headers renders a decision's headers the way a client reads them.
func headers(d Decision) map[string]string {
	h := http.Header{}
	d.WriteHeaders(h)
	out := map[string]string{}
	for k := range h {
		out[strings.ToLower(k)] = h.Get(k)
	}
	return out
}

func clock(l *Local) *time.Time {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.now = func() time.Time { return t }
	return &t
}

func TestRequestsPerMinute(t *testing.T) {
	l := NewLocal()
	now := clock(l)
	key := Scope{Name: "key", ID: "k:1", Rule: Rule{RequestsPerMinute: 3}}
	for i := 0; i < 3; i++ {
		d := l.Take(key)
		if !d.Allowed {
			t.Fatalf("request %d refused", i+1)
		}
		if got := headers(d)["x-ratelimit-remaining-requests"]; got != []string{"2", "1", "0"}[i] {
			t.Errorf("request %d: remaining %q", i+1, got)
		}
	}
	d := l.Take(key)
	if d.Allowed || d.Refused != "key" || d.RetryAfter != 20*time.Second {
		t.Fatalf("4th request: %+v", d)
	}
	if headers(d)["x-ratelimit-limit-requests"] != "3" || headers(d)["x-ratelimit-reset-requests"] != "1m0s" {
		t.Errorf("headers %v", headers(d))
	}
	*now = now.Add(20 * time.Second) // one request refilled
	if !l.Take(key).Allowed || l.Take(key).Allowed {
		t.Fatal("after 20 s exactly one more request fits")
	}
}

func TestBothScopesApplyAndRefusalTakesNothing(t *testing.T) {
	l := NewLocal()
	clock(l)
	dep := Scope{Name: "deployment", ID: "d:1", Rule: Rule{RequestsPerMinute: 10}}
	k1 := Scope{Name: "key", ID: "k:1", Rule: Rule{RequestsPerMinute: 1}}
	k2 := Scope{Name: "key", ID: "k:2"}
	if !l.Take(dep, k1).Allowed {
		t.Fatal("first request refused")
	}
	for i := 0; i < 5; i++ {
		if d := l.Take(dep, k1); d.Allowed || d.Refused != "key" {
			t.Fatalf("key limit did not bind: %+v", d)
		}
	}
	// The key's refusals took nothing from the deployment: 9 remain for other keys.
	for i := 0; i < 9; i++ {
		if !l.Take(dep, k2).Allowed {
			t.Fatalf("deployment bucket was charged for refused requests (request %d)", i+1)
		}
	}
	if d := l.Take(dep, k2); d.Allowed || d.Refused != "deployment" {
		t.Fatalf("deployment limit did not bind: %+v", d)
	}
}

func TestTokensPerMinuteBindAfterCharge(t *testing.T) {
	l := NewLocal()
	now := clock(l)
	s := Scope{Name: "deployment", ID: "d:1", Rule: Rule{TokensPerMinute: 100}}
	if !l.Take(s).Allowed {
		t.Fatal("refused before any usage")
	}
	l.Charge(150, s) // more than the bucket: it is emptied
	d := l.Take(s)
	if d.Allowed || d.RetryAfter <= 0 || headers(d)["x-ratelimit-remaining-tokens"] != "0" {
		t.Fatalf("tokens limit did not bind after the charge: %+v", d)
	}
	*now = now.Add(d.RetryAfter)
	if !l.Take(s).Allowed {
		t.Fatal("still refused after Retry-After")
	}
}

func TestChangedRuleStartsOver(t *testing.T) {
	l := NewLocal()
	clock(l)
	s := Scope{Name: "key", ID: "k:1", Rule: Rule{RequestsPerMinute: 1}}
	l.Take(s)
	if l.Take(s).Allowed {
		t.Fatal("limit of 1 let two through")
	}
	s.Rule.RequestsPerMinute = 5
	if !l.Take(s).Allowed {
		t.Fatal("a raised limit still refused")
	}
}

func TestShare(t *testing.T) {
	if got := (Rule{RequestsPerMinute: 10, TokensPerMinute: 1}).Share(3); got != (Rule{3, 1}) {
		t.Fatalf("share %+v", got)
	}
}

// The six headers carry their own values, in OpenAI's formats.
func TestHeaderValues(t *testing.T) {
	d := Decision{Requests: Window{Limit: 60, Remaining: 59, Reset: 120 * time.Millisecond},
		Tokens: Window{Limit: 100000, Remaining: 0, Reset: 6 * time.Minute}}
	want := map[string]string{"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "59", "x-ratelimit-reset-requests": "120ms",
		"x-ratelimit-limit-tokens": "100000", "x-ratelimit-remaining-tokens": "0", "x-ratelimit-reset-tokens": "6m0s"}
	got := headers(d)
	if len(got) != len(want) {
		t.Fatalf("headers %v", got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if h := headers(Decision{Tokens: Window{Limit: 5, Remaining: 5}}); len(h) != 3 || h["x-ratelimit-reset-tokens"] != "0s" {
		t.Errorf("tokens only: %v", h)
	}
}

// BenchmarkAdmit is what a limited edge request costs the limiter: Take under a deployment's and a
// key's limits, the x-ratelimit-* headers, and Charge at the end.
func BenchmarkAdmit(b *testing.B) {
	l := NewLocal()
	rule := Rule{RequestsPerMinute: 100_000_000, TokensPerMinute: 100_000_000}
	scopes := []Scope{{Name: "deployment", ID: "dep_1", Rule: rule}, {Name: "key", ID: "key_1", Rule: rule}}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h := http.Header{"Content-Type": {"text/event-stream"}, "X-Request-Id": {"r"}}
			d := l.Take(scopes...)
			d.WriteHeaders(h)
			l.Charge(40, scopes...)
		}
	})
}
