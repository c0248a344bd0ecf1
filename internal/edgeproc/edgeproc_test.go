package edgeproc

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgesync"
)

// unreachable is a control plane that refuses every connection: a loopback port nothing listens on.
func unreachable(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, cfg Config) *Edge {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.ControlPlane == "" {
		cfg.ControlPlane = unreachable(t)
	}
	cfg.EdgeToken, cfg.EndpointDomain, cfg.Logger = "svc-edge-test", "edge.test", quiet()
	cfg.Sync = edgesync.Options{RetryDown: 50 * time.Millisecond}
	e, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestOperatingRoutes: an edge whose control plane never answered is alive but not ready, says why,
// serves its metrics, and answers any other path on its own host 404 in the API envelope.
func TestOperatingRoutes(t *testing.T) {
	e := start(t, Config{})
	base := "http://" + e.Addr.String()
	if code, body := get(t, base+"/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	code, body := get(t, base+"/readyz")
	var ready struct {
		Status string
		Checks map[string]string
		Synced bool
	}
	if err := json.Unmarshal([]byte(body), &ready); err != nil || code != 503 || ready.Status != "unavailable" ||
		ready.Checks["controlPlane"] != "not synced yet" || ready.Checks["recorder"] != "ok" || ready.Synced {
		t.Fatalf("/readyz without a control plane: %d %s", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "svc_recorder_queue_depth") {
		t.Fatalf("/metrics: %d %.200s", code, body)
	}
	code, body = get(t, base+"/v1/models")
	var env struct {
		Error struct {
			Status        int
			Code, Message string
		}
	}
	if err := json.Unmarshal([]byte(body), &env); err != nil || code != 404 || env.Error.Code != "not_found" ||
		!strings.Contains(env.Error.Message, "this is an svc edge") {
		t.Fatalf("another path on the edge's own host: %d %s", code, body)
	}
}

// TestMetricsOnTheirOwnListener: with MetricsAddr, /metrics moves off the edge's listener.
func TestMetricsOnTheirOwnListener(t *testing.T) {
	e := start(t, Config{MetricsAddr: "127.0.0.1:0"})
	if code, body := get(t, "http://"+e.MetricsAddr.String()+"/metrics"); code != 200 || !strings.Contains(body, "svc_") {
		t.Fatalf("/metrics on its listener: %d %.200s", code, body)
	}
	if code, _ := get(t, "http://"+e.Addr.String()+"/metrics"); code != 404 {
		t.Fatalf("/metrics on the edge's listener: %d, want 404", code)
	}
}

// TestStartRefusesWhatItCannotServe: no control plane or no edge token is an error naming the flag to
// give, and the token never appears in an error.
func TestStartRefusesWhatItCannotServe(t *testing.T) {
	if _, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", EdgeToken: "svc-edge-secret", Logger: quiet()}); err == nil ||
		!strings.Contains(err.Error(), "--control-plane") || strings.Contains(err.Error(), "svc-edge-secret") {
		t.Fatalf("no control plane: %v", err)
	}
	if _, err := Start(context.Background(), Config{Addr: "127.0.0.1:0", ControlPlane: "http://127.0.0.1:1", Logger: quiet()}); err == nil ||
		!strings.Contains(err.Error(), "edge token") {
		t.Fatalf("no edge token: %v", err)
	}
	busy := start(t, Config{})
	if _, err := Start(context.Background(), Config{Addr: busy.Addr.String(), ControlPlane: "http://127.0.0.1:1", EdgeToken: "svc-edge-secret",
		Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "--addr") {
		t.Fatalf("an address in use: %v", err)
	}
}

// TestASpoolFolderInUse: a second edge on a spool folder another edge holds is refused when the folder
// was named (--spool-dir), and starts without a spool when it was only the default.
func TestASpoolFolderInUse(t *testing.T) {
	dir := t.TempDir()
	start(t, Config{SpoolDir: dir})
	cfg := Config{Addr: "127.0.0.1:0", ControlPlane: unreachable(t), EdgeToken: "svc-edge-test", EndpointDomain: "edge.test", Logger: quiet(), SpoolDir: dir}
	if e, err := Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "another svc edge") {
		if e != nil {
			e.Close()
		}
		t.Fatalf("a named spool folder in use: %v", err)
	}
	cfg.SpoolOptional = true
	e, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("the default spool folder in use: %v", err)
	}
	e.Close()
}
