package server

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/svcdev/svc/db/storetest"
	"github.com/svcdev/svc/internal/edgeproc"
)

// Feedback naming a run by an id PostgreSQL's TEXT refuses (a NUL) is the endpoint's one 404 on svc
// server and on an svc edge process over PostgreSQL, never a 5xx or a 503 with Retry-After (which SDKs
// retry), and logs no ERROR.
func TestFeedbackByARefusedIDIsNotFound(t *testing.T) {
	url := storetest.Postgres(t).NewDatabase(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelError}))
	c := newCluster(t, func(cfg *Config) { cfg.Database, cfg.Logger = url, log })
	e := c.edge("", func(cfg *edgeproc.Config) { cfg.Logger = log })
	_, key := c.deploy("scored", "")
	post := func(addr net.Addr, domain, id string) (int, string, string) {
		body := `{"id":"` + id + `","score":1}`
		req, _ := http.NewRequest("POST", "http://scored."+domain+"/v1/feedback", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := edgeClient(addr.String()).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
	}
	ids := []string{`\u0000`, `run_\u0000`, `chatcmpl-0000000000000\u0000`, `msg_\u0000abc`, `resp_\u0000`}
	_, _, want := post(e.Addr, edgeDomain, "chatcmpl-0000000000000none")
	for _, id := range ids {
		for name, at := range map[string]struct {
			addr   net.Addr
			domain string
		}{"svc server": {c.cp.Addr, c.cp.EndpointDomain}, "svc edge": {e.Addr, edgeDomain}} {
			st, retry, body := post(at.addr, at.domain, id)
			if st != 404 || retry != "" || body != want {
				t.Errorf("%s, id %s: HTTP %d Retry-After %q %s; want the 404 of an unknown id: %s", name, id, st, retry, body, want)
			}
		}
	}
	if logs.String() != "" {
		t.Errorf("logged:\n%s", logs.String())
	}
}
