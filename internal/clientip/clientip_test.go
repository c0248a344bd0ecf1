package clientip

import (
	"net/http"
	"testing"
)

func TestAddr(t *testing.T) {
	r, err := Parse("10.0.0.0/8, 192.0.2.7")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"untrusted peer: XFF ignored", "203.0.113.5:1234", []string{"1.2.3.4"}, "203.0.113.5"},
		{"trusted proxy: client from XFF", "10.1.2.3:80", []string{"198.51.100.9"}, "198.51.100.9"},
		{"spoofed left entries are skipped", "10.1.2.3:80", []string{"6.6.6.6, 198.51.100.9"}, "198.51.100.9"},
		{"chain of trusted proxies", "10.1.2.3:80", []string{"198.51.100.9, 192.0.2.7", "10.9.9.9"}, "198.51.100.9"},
		{"garbage stops at last good", "10.1.2.3:80", []string{"198.51.100.9, not-an-ip"}, "10.1.2.3"},
		{"trusted proxy without XFF", "192.0.2.7:80", nil, "192.0.2.7"},
		{"IPv4-mapped IPv6 peer", "[::ffff:10.0.0.1]:80", []string{"198.51.100.9"}, "198.51.100.9"},
	}
	for _, tc := range cases {
		req := &http.Request{RemoteAddr: tc.remote, Header: http.Header{}}
		for _, v := range tc.xff {
			req.Header.Add("X-Forwarded-For", v)
		}
		if got := r.String(req); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	var none *Resolver
	req := &http.Request{RemoteAddr: "127.0.0.1:5", Header: http.Header{"X-Forwarded-For": {"1.2.3.4"}}}
	if got := none.String(req); got != "127.0.0.1" {
		t.Errorf("nil resolver believed X-Forwarded-For: %q", got)
	}
}

func TestKeyGroupsIPv6By64(t *testing.T) {
	a := &http.Request{RemoteAddr: "[2001:db8:1:2::1]:1"}
	b := &http.Request{RemoteAddr: "[2001:db8:1:2:ffff::9]:1"}
	c := &http.Request{RemoteAddr: "[2001:db8:1:3::1]:1"}
	var r *Resolver
	if r.Key(a) != r.Key(b) || r.Key(a) == r.Key(c) {
		t.Fatalf("keys: %s %s %s", r.Key(a), r.Key(b), r.Key(c))
	}
}

func TestParseRejectsGarbage(t *testing.T) {
	if _, err := Parse("10.0.0.0/8, nonsense"); err == nil {
		t.Fatal("no error for a bad entry")
	}
}
