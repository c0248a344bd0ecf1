package edgesync

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/internal/edgewire"
)

// runsCP is a control plane's GET runs/{deploymentId}/{runId}: one stored run, a missing one, and the
// failures an edge must tell apart from a missing run.
func runsCP(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"status":401,"code":"unauthorized","message":"no"}}`))
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, edgewire.StoredRunsPath)
		if !ok || r.Method != http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		switch rest {
		case "dep_a/run_kept":
			json.NewEncoder(w).Encode(edgewire.StoredRun{Request: `{"input":"first \"turn\""}`, Response: `{"object":"response"}`})
		case "dep_a/run_missing", "dep_b/run_kept":
			w.Header().Set(edgewire.NotFoundHeader, "run")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"status":404,"code":"not_found","message":"run not found"}}`))
		case "dep_a/run_old_control_plane":
			// A control plane without this route answers its plain 404.
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"status":404,"code":"not_found","message":"no such route"}}`))
		case "dep_a/run_failing":
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"error":{"status":500,"code":"internal","message":"internal error"}}`))
		case "dep_a/run_slow":
			<-r.Context().Done()
		default:
			t.Errorf("unexpected path %s", r.URL.Path)
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// An edge reads a stored run from its control plane: found, not found (only when the control plane
// says so), and unavailable for everything else, within RunTimeout, never naming the edge token.
func TestStoredRunsAreReadFromTheControlPlane(t *testing.T) {
	cp := runsCP(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	// The first replica is gone: the client moves to the next, as for every other call.
	client, err := NewClient(dead.URL+","+cp.URL, testToken)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCache(client, Options{Logger: quietLog(), RunTimeout: 300 * time.Millisecond, RetryDown: time.Nanosecond})
	ctx := context.Background()

	req, resp, err := c.EdgeRun(ctx, "dep_a", "run_kept")
	if err != nil || string(req) != `{"input":"first \"turn\""}` || string(resp) != `{"object":"response"}` {
		t.Fatalf("a stored run: %s %s %v", req, resp, err)
	}
	for _, tc := range []struct {
		deployment, run, code string
	}{
		{"dep_a", "run_missing", edgemodel.CodeNotFound},
		{"dep_b", "run_kept", edgemodel.CodeNotFound}, // another deployment's run is not this one's
		{"dep_a", "run_old_control_plane", edgemodel.CodeUnavailable},
		{"dep_a", "run_failing", edgemodel.CodeUnavailable},
		{"dep_a", "run_slow", edgemodel.CodeUnavailable},
	} {
		start := time.Now()
		_, _, err := c.EdgeRun(ctx, tc.deployment, tc.run)
		if edgemodel.CodeOf(err) != tc.code {
			t.Errorf("%s/%s: %v; want %s", tc.deployment, tc.run, err, tc.code)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("%s/%s took %v: RunTimeout does not bound it", tc.deployment, tc.run, took)
		}
		if err != nil && strings.Contains(err.Error(), testToken) {
			t.Errorf("%s/%s: the error names the edge token: %v", tc.deployment, tc.run, err)
		}
	}

	// A refused token and a control plane that is gone are unavailable too, and say so.
	refused, _ := NewClient(cp.URL, testToken+"-revoked")
	if _, _, err := NewCache(refused, Options{Logger: quietLog()}).EdgeRun(ctx, "dep_a", "run_kept"); edgemodel.CodeOf(err) != edgemodel.CodeUnavailable ||
		!strings.Contains(err.Error(), "refuses the edge token") || strings.Contains(err.Error(), testToken) {
		t.Errorf("a refused edge token: %v", err)
	}
	gone, _ := NewClient(dead.URL, testToken)
	if _, _, err := NewCache(gone, Options{Logger: quietLog()}).EdgeRun(ctx, "dep_a", "run_kept"); edgemodel.CodeOf(err) != edgemodel.CodeUnavailable {
		t.Errorf("a control plane that is gone: %v", err)
	}
}

// The control plane's key of thinking signatures comes with the feed's hello, is kept in the snapshots
// file (0600) and is there again after a restart with the control plane gone, however old the file;
// a newer hello replaces it. It never reaches the log.
func TestThinkingSecretComesWithTheHelloAndSurvivesARestart(t *testing.T) {
	f := newFakeCP(t)
	dir := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	first, second := bytes.Repeat([]byte{0xa5}, 32), bytes.Repeat([]byte{0x3c}, 32)

	run := func(hello []byte) {
		t.Helper()
		client, _ := NewClient(f.srv.URL, testToken)
		c := NewCache(client, Options{StateDir: dir, Logger: log, RetryDown: time.Nanosecond})
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan struct{})
		go func() {
			defer close(ran)
			c.Run(ctx)
		}()
		c.onHello(edgewire.Hello{Head: 3, Reset: true, ThinkingSecret: hello})
		if !bytes.Equal(c.ThinkingSecret(), hello) {
			t.Fatalf("after the hello: %x", c.ThinkingSecret())
		}
		cancel()
		<-ran // saved as the cache stops
	}
	client, _ := NewClient(f.srv.URL, testToken)
	if s := NewCache(client, Options{StateDir: dir, Logger: log}).ThinkingSecret(); s != nil {
		t.Fatalf("an edge that never reached a control plane has a key: %x", s)
	}
	run(first)
	f.srv.Close() // the control plane is gone
	restarted := func() []byte {
		client, _ := NewClient(f.srv.URL, testToken)
		later := time.Now().Add(time.Hour) // every snapshot long past max-stale
		return NewCache(client, Options{StateDir: dir, Logger: log, Now: func() time.Time { return later }}).ThinkingSecret()
	}
	if s := restarted(); !bytes.Equal(s, first) {
		t.Fatalf("after a restart with the control plane gone: %x", s)
	}
	info, err := os.Stat(filepath.Join(dir, snapshotsFile))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the snapshots file: %v %v", info, err)
	}
	run(second)
	if s := restarted(); !bytes.Equal(s, second) {
		t.Fatalf("a newer hello's key after a restart: %x", s)
	}
	for _, k := range [][]byte{first, second} {
		if strings.Contains(logs.String(), base64.StdEncoding.EncodeToString(k)) || bytes.Contains(logs.Bytes(), k) {
			t.Fatal("the log holds the key")
		}
	}
}
