package studio

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestPageCarriesCSRFTokenInMeta(t *testing.T) {
	h := newHarness(t)
	r := h.do(http.MethodGet, "/", nil)
	wantStatus(t, r, http.StatusOK)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)"`).FindStringSubmatch(r.body)
	if m == nil || m[1] != h.studio.CSRFToken() {
		t.Fatalf("page has no meta csrf-token equal to CSRFToken(): %v", m)
	}
	if len(h.studio.CSRFToken()) < 64 {
		t.Errorf("token %q is shorter than 32 random bytes", h.studio.CSRFToken())
	}
	if !strings.Contains(r.header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Errorf("no CSP on the page: %q", r.header.Get("Content-Security-Policy"))
	}
}

func TestEachLaunchHasItsOwnToken(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	if a.studio.CSRFToken() == b.studio.CSRFToken() {
		t.Fatal("two launches share a CSRF token")
	}
}

func TestCSRFRequired(t *testing.T) {
	h := newHarness(t)
	h.writeCreds("anonymous")
	h.writeState()
	d := h.cloud.add(deployment("alpha"))

	routes := []struct{ method, path string }{
		{"GET", "/api/deployments"},
		{"POST", "/api/deployments"},
		{"GET", "/api/deployments/" + d.ID},
		{"PATCH", "/api/deployments/" + d.ID},
		{"DELETE", "/api/deployments/" + d.ID},
		{"POST", "/api/deployments/" + d.ID + "/keys"},
		{"POST", "/api/deployments/" + d.ID + "/keys/k1/revoke"},
		{"GET", "/api/deployments/" + d.ID + "/runs"},
		{"POST", "/api/deployments/" + d.ID + "/runs/export"},
		{"GET", "/api/deployments/" + d.ID + "/runs/export/0123"},
		{"GET", "/api/deployments/" + d.ID + "/runs/export"}, // the download link: the session cookie or the token
		{"POST", "/api/inference/chat"},
		{"POST", "/api/credentials"},
	}
	for _, rt := range routes {
		for name, opts := range map[string][]reqOpt{
			"missing": nil,
			"wrong":   {withCSRF(strings.Repeat("0", 64))},
			"htmx":    {asHTMX},
		} {
			t.Run(rt.method+" "+rt.path+" "+name, func(t *testing.T) {
				before := h.cloud.callCount()
				r := h.do(rt.method, rt.path, nil, opts...)
				wantStatus(t, r, http.StatusForbidden)
				if name != "htmx" {
					if e := r.envelope(t); e.Code != "csrf" {
						t.Errorf("code %q, want csrf", e.Code)
					}
				}
				if n := h.cloud.callCount() - before; n != 0 {
					t.Errorf("%d upstream calls without a token", n)
				}
			})
		}
	}
}

func TestReadsWithoutSecretsNeedNoToken(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/api/jobs", "/api/credentials", "/"} {
		if r := h.do(http.MethodGet, p, nil); r.status != http.StatusOK {
			t.Errorf("GET %s: %d %s", p, r.status, r.body)
		}
	}
}

func TestForeignHostRefused(t *testing.T) {
	h := newHarness(t)
	_, port, _ := strings.Cut(h.host, ":")
	for _, host := range []string{
		"evil.example:" + port,
		"evil.example",
		"localhost.evil.example:" + port,
		"127.0.0.2:" + port,
		"localhost:1",
		"192.168.1.10:" + port,
	} {
		t.Run(host, func(t *testing.T) {
			r := h.do(http.MethodGet, "/", nil, withHost(host))
			if r.status != http.StatusMisdirectedRequest && r.status != http.StatusForbidden {
				t.Fatalf("Host %s: status %d", host, r.status)
			}
			if strings.Contains(r.body, h.studio.CSRFToken()) {
				t.Fatal("the token leaked to a foreign Host")
			}
			if e := r.envelope(t); e.Code != "bad_host" {
				t.Errorf("code %q", e.Code)
			}
		})
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "LOCALHOST:" + port} {
		t.Run(host, func(t *testing.T) {
			wantStatus(t, h.do(http.MethodGet, "/", nil, withHost(host)), http.StatusOK)
		})
	}
}

func TestServeRefusesNonLoopbackListener(t *testing.T) {
	h := newHarness(t)
	l := fakeListener{addr: &netTCPAddr}
	if err := h.studio.Serve(l); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Serve on 0.0.0.0: %v", err)
	}
}
