package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

func TestEndpointURL(t *testing.T) {
	for _, c := range []struct{ base, domain, want string }{
		{"http://localhost:8080", "localhost:8080", "http://demo.localhost:8080"},                  // a laptop
		{"https://api.example.com", "endpoints.example.com", "https://demo.endpoints.example.com"}, // production
		{"http://127.0.0.13:28093", "127.0.0.13:28093", "http://127.0.0.13:28093/e/demo"},          // an address has no subdomains
		{"http://[::1]:8080", "[::1]:8080", "http://[::1]:8080/e/demo"},                            //
		{"http://box.lan:8080", "box.lan:8080", "http://demo.box.lan:8080"},                        // the listener's own host: its scheme
		{"http://api.example.com", "endpoints.example.com", "https://demo.endpoints.example.com"},  // a real domain is served over TLS
	} {
		if got := EndpointURL(c.base, c.domain)("demo"); got != c.want {
			t.Errorf("EndpointURL(%q, %q) = %q, want %q", c.base, c.domain, got, c.want)
		}
	}
}

// The default base URL and endpoint domain take their host from the listen address (localhost for
// 127.0.0.1 and for no or an unspecified host).
func TestDefaultHost(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "localhost", ":8080": "localhost", "0.0.0.0:8080": "localhost", "[::]:8080": "localhost",
		"localhost:8080": "localhost", "127.0.0.13:28093": "127.0.0.13", "[::1]:8080": "::1", "box.lan:8080": "box.lan",
	} {
		if got := defaultHost(addr); got != want {
			t.Errorf("defaultHost(%q) = %q, want %q", addr, got, want)
		}
	}
	srv, err := Start(context.Background(), Config{Addr: "127.0.0.13:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := srv.Addr.(*net.TCPAddr).Port
	want := "http://127.0.0.13:" + strconv.Itoa(port)
	if srv.BaseURL != want || srv.EndpointDomain != "127.0.0.13:"+strconv.Itoa(port) {
		t.Fatalf("base URL %q, endpoint domain %q; want %s", srv.BaseURL, srv.EndpointDomain, want)
	}
	resp, err := http.Get(srv.BaseURL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz at the default base URL: %d", resp.StatusCode)
	}
}

// TestOneListenerServesAPIAndEdge starts the real server and checks that the Host header and the path
// form reach the edge while everything else reaches the management API, and that data survives a
// restart on the same folder (migrations are applied once).
func TestOneListenerServesAPIAndEdge(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	srv, err := Start(ctx, Config{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cloudapi.New(srv.BaseURL, "").AnonymousProject(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.CreateDeployment(ctx, cloudapi.CreateDeploymentRequest{Slug: "open", AuthMode: "none", Target: cloudapi.Target{Kind: "multi_model"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "http://open." + srv.EndpointDomain; d.URL != want {
		t.Fatalf("url %q, want %q", d.URL, want)
	}

	// Go cannot resolve *.localhost, so dial the listener and name the host in the request.
	addr := srv.Addr.String()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	get := func(url string) (int, string) {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, url := range []string{d.URL + "/v1/models", srv.BaseURL + "/e/open/v1/models"} {
		status, body := get(url)
		var list struct {
			Object string                `json:"object"`
			Data   []struct{ ID string } `json:"data"`
		}
		if status != 200 || json.Unmarshal([]byte(body), &list) != nil || list.Object != "list" || len(list.Data) == 0 {
			t.Fatalf("GET %s: %d %s", url, status, body)
		}
	}
	// An unknown slug is the edge's 404 (OpenAI shape); an unknown API route is the API's (its envelope).
	if status, body := get("http://nobody." + srv.EndpointDomain + "/v1/models"); status != 404 || !strings.Contains(body, `"type"`) {
		t.Fatalf("unknown slug: %d %s", status, body)
	}
	if status, body := get(srv.BaseURL + "/v1/nothing-here"); status != 404 || !strings.Contains(body, `"code":"not_found"`) {
		t.Fatalf("unknown API route: %d %s", status, body)
	}

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	srv, err = Start(ctx, Config{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c.BaseURL = srv.BaseURL
	if list, err := c.ListDeployments(ctx); err != nil || len(list) != 1 || list[0].Slug != "open" {
		t.Fatalf("after restart: %+v %v", list, err)
	}
}
