package inference

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/svcdev/svc/internal/jsonx"
	"github.com/svcdev/svc/internal/sse"
)

// streamUpstream serves a short chat stream whose end of answer (the last chunk of the chunked
// encoding) leaves after "data: [DONE]", after linger; it counts the connections it accepts.
func streamUpstream(t *testing.T, linger time.Duration) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, tok := range []string{"Hello", " there"} {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", tok)
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
		w.(http.Flusher).Flush()
		time.Sleep(linger) // the chunked answer's end comes apart from [DONE]
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func streamOnce(t *testing.T, rt Runtime) (string, time.Duration) {
	t.Helper()
	st, err := rt.Stream(context.Background(), &Call{Model: "up", Served: "up", Stream: true,
		Body: map[string]json.RawMessage{"messages": json.RawMessage(`[{"role":"user","content":"hi"}]`)}})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, ch := range readChunks(t, st) {
		for _, c := range ch.Choices {
			text += c.Content
		}
	}
	t0 := time.Now()
	st.Close()
	return text, time.Since(t0)
}

// A finished stream leaves its upstream connection reusable: streams one after the other use one
// connection, even when the end of the HTTP answer arrives apart from [DONE].
func TestStreamsReuseUpstreamConnection(t *testing.T) {
	srv, conns := streamUpstream(t, 5*time.Millisecond)
	reg, err := NewRegistry([]ModelConfig{{Name: "up", Runtime: "openai", UpstreamURL: srv.URL + "/v1", Public: true}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if text, _ := streamOnce(t, reg.Runtime("up")); text != "Hello there" {
			t.Fatalf("stream %d read %q", i, text)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 streams in a row opened %d upstream connections, want 1", n)
	}
}

// An upstream that keeps its answer open after [DONE] does not hold the stream's Close (and so the
// client's answer) for longer than drainWait.
func TestStreamCloseDoesNotWaitForLingeringUpstream(t *testing.T) {
	srv, _ := streamUpstream(t, time.Second)
	reg, err := NewRegistry([]ModelConfig{{Name: "up", Runtime: "openai", UpstreamURL: srv.URL + "/v1", Public: true}})
	if err != nil {
		t.Fatal(err)
	}
	text, took := streamOnce(t, reg.Runtime("up"))
	if text != "Hello there" {
		t.Fatalf("read %q", text)
	}
	if took > drainWait+500*time.Millisecond {
		t.Fatalf("Close took %v with an upstream lingering 1s after [DONE], want about %v", took, drainWait)
	}
	if took < drainWait/2 {
		t.Fatalf("Close took %v: it did not wait for the end of the answer at all", took)
	}
}

// Next reads what the edge needs of each chunk (one pass over its fields) and relays the chunk with the
// served model in place of the upstream's.
func TestStreamChunkFields(t *testing.T) {
	body := strings.Join([]string{
		`data: {"id":"c1","object":"chat.completion.chunk","created":17,"model":"up-m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`data: {"id":"c1","object":"chat.completion.chunk","created":17,"model":"up-m","choices":[{"index":0,"delta":{"content":"a \"q\" \u00e9"},"finish_reason":null}]}`,
		`data: {"id":"c1","created":17,"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}},{"index":1,"id":"call_2","function":{"name":"now","arguments":"{}"}}]},"index":0}],"model":"up-m"}`,
		`data: {"id":"c1","created":17,"model":"up-m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
		`data: {"id":"c1","created":17,"model":"up-m","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"END"},{"index":1,"delta":{"content":"b"},"finish_reason":null,"stop_reason":"ignored"}]}`,
		`data: {"id":"c1","created":17,"model":"up-m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1,"audio_tokens":0}}}`,
		`data: [DONE]`, ``}, "\n\n")
	got := readChunks(t, streamOf(body, "ft-served"))
	for i := range got {
		if !bytes.Contains(got[i].JSON, []byte(`"model":"ft-served"`)) || bytes.Contains(got[i].JSON, []byte("up-m")) {
			t.Errorf("chunk relayed as %s, want the served model", got[i].JSON)
		}
		got[i].JSON = nil
	}
	want := []Chunk{
		{ID: "c1", Created: 17, Choices: []ChunkChoice{{Role: "assistant"}}},
		{ID: "c1", Created: 17, Choices: []ChunkChoice{{Content: `a "q" é`}}},
		{ID: "c1", Created: 17, Choices: []ChunkChoice{{ToolCalls: []ToolCallDelta{{Index: 0, ID: "call_1", Name: "get_weather"}, {Index: 1, ID: "call_2", Name: "now", Arguments: "{}"}}}}},
		{ID: "c1", Created: 17, Choices: []ChunkChoice{{ToolCalls: []ToolCallDelta{{Arguments: `{"city":`}}}}},
		{ID: "c1", Created: 17, Choices: []ChunkChoice{{FinishReason: "stop", StopReason: "END"}, {Index: 1, Content: "b"}}},
		{ID: "c1", Created: 17, Usage: &Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5, ReasoningTokens: 1, CachedTokens: 2}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("chunks\n got %+v\nwant %+v", got, want)
	}
	// An error event ends the stream with the upstream's message.
	s := streamOf(`data: {"choices":[],"error":{"message":"out of memory","code":500}}`+"\n\n", "x")
	if _, err := s.Next(); err == nil || !strings.Contains(err.Error(), "out of memory") {
		t.Errorf("error event: %v", err)
	}
}

// readChunks reads a stream to its end: copies of its chunks, as Next reuses them.
func readChunks(t *testing.T, st Stream) []Chunk {
	t.Helper()
	var out []Chunk
	for {
		ch, err := st.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c := *ch
		c.JSON = bytes.Clone(ch.JSON)
		c.Choices = append([]ChunkChoice(nil), ch.Choices...)
		out = append(out, c)
	}
}

// streamOf reads body as an upstream chat stream of model "m" that is served as served.
func streamOf[B string | []byte](body B, served string) *upstreamStream {
	return surfaceStream(SurfaceChat, body, served)
}

// surfaceStream reads body as an upstream stream of the surface, of model "m" served as served.
func surfaceStream[B string | []byte](s Surface, body B, served string) *upstreamStream {
	return &upstreamStream{ctx: context.Background(), o: &openAI{cfg: ModelConfig{Name: "m"}}, surface: s, body: io.NopCloser(nil),
		rd: sse.NewReader(strings.NewReader(string(body))), served: jsonx.AppendString(nil, served)}
}

// BenchmarkStreamNext measures reading 1000 token chunks as a vLLM stream sends them, renamed for the
// served model; svc-id also writes the edge's chatcmpl-<run tail> in place of the upstream's id (Call.ID).
func BenchmarkStreamNext(b *testing.B) {
	ev := "data: " + `{"id":"chatcmpl-8f3a2c1e9b7d4f60","object":"chat.completion.chunk","created":1732000000,"model":"mock-model","choices":[{"index":0,"delta":{"content":" fox"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	stream := strings.Repeat(ev, 1000)
	for _, id := range []string{"", "chatcmpl-19c0ad2e1f400AbCdEfGh"} {
		name := "upstream-id"
		if id != "" {
			name = "svc-id"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := streamOf(stream, "served")
				if id != "" {
					s.id, s.idJSON = id, jsonx.AppendString(nil, id)
				}
				for {
					ch, err := s.Next()
					if err != nil {
						break
					}
					if id != "" && !bytes.Contains(ch.JSON, s.idJSON) {
						b.Fatalf("chunk without svc's id: %s", ch.JSON)
					}
				}
				s.rd.Release()
			}
		})
	}
}
