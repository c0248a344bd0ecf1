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
