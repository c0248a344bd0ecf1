package translate

import "testing"

// The per-chunk cost of the translated streams (docs/OPERATIONS.md, "Overhead"): one token chunk, as
// the edge hands it over after the runtime read it (the same read a relayed chat stream pays),
// translated into the surface's events. Compare with internal/inference's BenchmarkStreamNext, the
// read of a relayed chunk.

func benchChunks(b *testing.B, add func(*StreamChunk) ([]Event, error)) {
	b.Helper()
	c := &StreamChunk{ID: "chatcmpl-8f3a2c1e9b7d4f60", Choices: []StreamChoice{{Content: " fox"}}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := add(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMessagesStreamChunk(b *testing.B) {
	s := NewStream("m", &RequestInfo{}, 10)
	benchChunks(b, s.Add)
}

func BenchmarkResponsesStreamChunk(b *testing.B) {
	_, info, _ := ResponsesToChat([]byte(`{"input":"hi"}`), Options{})
	s := NewResponsesStream("resp_bench", "m", 1, info, 10)
	benchChunks(b, s.Add)
}

// The per-answer cost: the request translated, then a whole streamed answer (the 16 token chunks and
// the usage chunk make bench's mock upstream sends) translated into the surface's events: what a
// translated stream costs beyond a relayed one, chunk by chunk and once per request.
func benchAnswer(b *testing.B, request func() error, add func(*StreamChunk) ([]Event, error), finish func() ([]Event, error)) {
	b.Helper()
	if err := request(); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 16; i++ {
		if _, err := add(&StreamChunk{ID: "chatcmpl-8f3a2c1e9b7d4f60", Choices: []StreamChoice{{Content: " fox"}}}); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := add(&StreamChunk{ID: "chatcmpl-8f3a2c1e9b7d4f60", Choices: []StreamChoice{{FinishReason: "stop"}}}); err != nil {
		b.Fatal(err)
	}
	if _, err := add(&StreamChunk{ID: "chatcmpl-8f3a2c1e9b7d4f60", Usage: &Usage{InputTokens: 12, OutputTokens: 16}}); err != nil {
		b.Fatal(err)
	}
	if _, err := finish(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkMessagesAnswer(b *testing.B) {
	body := []byte(`{"model":"mock-model","max_tokens":64,"stream":true,"system":"You are terse.","messages":[{"role":"user","content":"Say something about foxes."}]}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var s *Stream
		benchAnswer(b, func() error {
			_, info, err := MessagesToChatWith(body, Options{})
			if err != nil {
				return err
			}
			s = NewStream("m", info, info.InputTokensEstimate())
			return nil
		}, func(c *StreamChunk) ([]Event, error) { return s.Add(c) }, func() ([]Event, error) { return s.Finish() })
	}
}

func BenchmarkResponsesAnswer(b *testing.B) {
	body := []byte(`{"model":"mock-model","instructions":"You are terse.","input":"Say something about foxes.","max_output_tokens":64,"stream":true}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var s *ResponsesStream
		benchAnswer(b, func() error {
			_, info, err := ResponsesToChat(body, Options{})
			if err != nil {
				return err
			}
			s = NewResponsesStream("resp_bench", "m", 1, info, info.InputTokensEstimate())
			return nil
		}, func(c *StreamChunk) ([]Event, error) { return s.Add(c) }, func() ([]Event, error) { return s.Finish() })
	}
}
