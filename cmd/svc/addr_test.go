package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// `svc dev --addr 127.0.0.13:PORT` prints and uses http://127.0.0.13:PORT/v1: the default base URL takes
// its host from --addr (docs/ARCHITECTURE.md, "Processes"), and so does the endpoint domain; an
// address has no subdomains, so endpoints are its path form. The studio's calls all work: credentials,
// the model picker, a create, the detail's quick start, the playground through the edge.
func TestDevTakesTheBaseURLHostFromAddr(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.13:0")
	if err != nil {
		t.Skipf("no 127.0.0.13 on this machine: %v", err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	home, dir := t.TempDir(), t.TempDir()
	dev := startDev(t, dir, svcEnv(home), "--addr", "127.0.0.13:"+port, "--data", filepath.Join(home, "data"))
	base := "http://127.0.0.13:" + port
	out := dev.stdout.String()
	if dev.apiBase != base || !strings.Contains(out, "API:       "+base+"/v1\n") || !strings.Contains(out, "endpoints: "+base+"/e/<slug>/v1\n") {
		t.Fatalf("svc dev --addr 127.0.0.13:%s printed:\n%s", port, out)
	}

	// The studio, as its page drives it: the CSRF token from the page, then its routes.
	page := get(t, dev.studioURL, nil)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([0-9a-f]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", page)
	}
	h := map[string]string{"X-CSRF-Token": m[1], "Content-Type": "application/json"}
	if got := send(t, "POST", dev.studioURL+"api/credentials", "", h, http.StatusOK); !strings.Contains(got, `"apiBaseUrl":"`+base+`"`) {
		t.Fatalf("credentials: %s", got)
	}
	if got := get(t, dev.studioURL+"api/models", nil); !strings.Contains(got, "sim-llama-3.1-8b-instruct") {
		t.Fatalf("models: %s", got)
	}
	var d struct{ ID, URL string }
	created := send(t, "POST", dev.studioURL+"api/deployments",
		`{"slug":"far","target":{"kind":"base_model","model":"sim-llama-3.1-8b-instruct"},"authMode":"none"}`, h, http.StatusCreated)
	if err := json.Unmarshal([]byte(created), &d); err != nil || d.URL != base+"/e/far" {
		t.Fatalf("created %s (%v), want the URL %s/e/far", created, err, base)
	}
	detail := get(t, dev.studioURL+"api/deployments/"+d.ID, map[string]string{"X-CSRF-Token": m[1], "HX-Request": "true"})
	if !strings.Contains(detail, base+"/e/far/v1/chat/completions") {
		t.Fatalf("the quick start does not call %s/e/far/v1:\n%s", base, detail)
	}
	reply := send(t, "POST", dev.studioURL+"api/inference/chat", `{"deploymentId":"`+d.ID+`","message":"far away"}`, h, http.StatusOK)
	if !strings.Contains(reply, "far away") {
		t.Fatalf("playground: %s", reply)
	}
	if code := dev.interrupt(t); code != 0 {
		t.Fatalf("svc dev exited %d on Ctrl-C", code)
	}
}

func get(t *testing.T, url string, headers map[string]string) string {
	t.Helper()
	return send(t, "GET", url, "", headers, http.StatusOK)
}

func send(t *testing.T, method, url, body string, headers map[string]string, want int) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, url, resp.StatusCode, want, b)
	}
	return string(b)
}
