package listen

import "testing"

func TestSlugFromHost(t *testing.T) {
	withPort := &Dispatcher{Domain: "localhost:8080"}
	bare := &Dispatcher{Domain: "endpoints.example.com"}
	cases := []struct {
		d    *Dispatcher
		host string
		slug string
	}{
		{withPort, "demo.localhost:8080", "demo"},
		{withPort, "DEMO.LocalHost:8080", "demo"},
		{withPort, "demo.localhost:9090", ""}, // another port is another server
		{withPort, "localhost:8080", ""},
		{withPort, "a.b.localhost:8080", ""},
		{bare, "demo.endpoints.example.com", "demo"},
		{bare, "demo.endpoints.example.com:443", "demo"}, // behind a proxy the port varies
		{bare, "endpoints.example.com", ""},
		{bare, "demo.example.com", ""},
		{bare, "evil-endpoints.example.com", ""},
		// A fully qualified host name (trailing dot) is the same name.
		{bare, "demo.endpoints.example.com.", "demo"},
		{bare, "demo.endpoints.example.com.:443", "demo"},
		{withPort, "demo.localhost.:8080", "demo"},
		{bare, "demo.endpoints.example.com..", ""},
		{bare, ".", ""},
	}
	for _, tc := range cases {
		slug, ok := tc.d.slugFromHost(tc.host)
		if slug != tc.slug || ok != (tc.slug != "") {
			t.Errorf("slugFromHost(%q) under %q = %q, %v; want %q", tc.host, tc.d.Domain, slug, ok, tc.slug)
		}
	}
}

func TestSlugFromHostAllocatesNothing(t *testing.T) {
	d := &Dispatcher{Domain: "localhost:8080"}
	if n := testing.AllocsPerRun(100, func() { d.slugFromHost("demo.localhost.:8080") }); n != 0 {
		t.Fatalf("slugFromHost allocates %v times a call", n)
	}
}
