package edge

import (
	"strings"
	"testing"
)

// BenchmarkChatCall is the edge's reading of a chat body before the runtime writes the upstream's body:
// the walker (bodyFields) and the call built from its members (chatCall: the messages by
// conv.ChatTurns, each judged by chatTurn), on a 40-turn conversation with text parts.
func BenchmarkChatCall(b *testing.B) {
	body := []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"messages":[{"role":"system","content":"You are terse."},` +
		strings.Repeat(`{"role":"user","content":[{"type":"text","text":"Say something about foxes,"},{"type":"text","text":"and about the dogs they jump over."}]},{"role":"assistant","content":"Foxes jump."},`, 20) +
		`{"role":"user","content":"end"}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		fields, e := bodyFields(body)
		if e != nil {
			b.Fatal(e.message)
		}
		if _, _, e := chatCall(fields); e != nil {
			b.Fatal(e.message)
		}
	}
}
