package edge_test

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/svcdev/svc/cloudapi"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/translated_upstream.golden from what the upstream receives")

// TestTranslatedUpstreamBodies sends every request of the translation corpus (internal/translate's
// testdata: Messages and Responses requests) through the edge to a mock upstream that serves chat only,
// streamed and not, on a model that asks for continuous usage and on one that does not, and compares
// the chat bodies the upstream received, byte for byte, with testdata/translated_upstream.golden
// (written by the code before the translations handed back members instead of a marshalled body:
// go test -run TestTranslatedUpstreamBodies -update rewrites it). A refused request is recorded with
// its status and answer.
func TestTranslatedUpstreamBodies(t *testing.T) {
	var (
		mu  sync.Mutex
		got []byte
	)
	e := newEnvWith(t, envOptions{upstreamSaw: func(r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		mu.Lock()
		got = append(got, r.URL.Path+" "+string(b)+"\n"...)
		mu.Unlock()
	}})
	e.deploy("tb-up", base("up"), cloudapi.AuthNone, "", 0)
	e.deploy("tb-counted", base("up-counted"), cloudapi.AuthNone, "", 0)
	messages, _ := filepath.Glob("../../internal/translate/testdata/request/*.messages.json")
	responses, _ := filepath.Glob("../../internal/translate/testdata/responses/request/*.request.json")
	if len(messages) < 5 || len(responses) < 5 {
		t.Fatalf("corpus: %d messages, %d responses requests", len(messages), len(responses))
	}
	var out bytes.Buffer
	send := func(file, path string) {
		body, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, slug := range []string{"tb-up", "tb-counted"} {
			for _, stream := range []bool{false, true} {
				b := withStream(t, body, stream)
				mu.Lock()
				got = got[:0]
				mu.Unlock()
				r := e.doHeaders("POST", slug, path, b, map[string]string{"anthropic-version": "2023-06-01"})
				mu.Lock()
				seen := string(got)
				mu.Unlock()
				fmt.Fprintf(&out, "== %s %s %s stream=%v: %d\n", filepath.Base(file), slug, path, stream, r.status)
				if r.status != 200 {
					fmt.Fprintf(&out, "answer %s\n", bytes.TrimSpace(r.body))
				}
				out.WriteString(seen)
			}
		}
	}
	for _, f := range messages {
		send(f, "/v1/messages")
	}
	for _, f := range responses {
		send(f, "/v1/responses")
	}
	const golden = "testdata/translated_upstream.golden"
	if *updateGolden {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		gl, wl := strings.Split(out.String(), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				at := 0
				for at < len(g) && at < len(w) && g[at] == w[at] {
					at++
				}
				from := max(at-80, 0)
				t.Fatalf("line %d of the upstream's bodies differs from %s at byte %d:\ngot  …%s\nwant …%s", i+1, golden, at,
					g[from:min(at+80, len(g))], w[from:min(at+80, len(w))])
			}
		}
	}
	if !strings.Contains(out.String(), "/v1/chat/completions {") {
		t.Fatal("no request reached the upstream's chat completions")
	}
}

// withStream returns body (a JSON object) with "stream" set to stream, at its end, when it has no stream
// member; as it is otherwise.
func withStream(t *testing.T, body []byte, stream bool) []byte {
	t.Helper()
	if bytes.Contains(body, []byte(`"stream"`)) || !stream {
		return body
	}
	b := bytes.TrimSpace(body)
	if len(b) < 2 || b[len(b)-1] != '}' {
		t.Fatalf("not an object: %.40s", b)
	}
	return append(append([]byte(nil), b[:len(b)-1]...), `,"stream":true}`...)
}
