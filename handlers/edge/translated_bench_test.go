package edge

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/svcdev/svc/internal/translate"
)

// BenchmarkTranslatedRequest is the edge's work on a translated request's body before the runtime
// writes the upstream's body: the walker (walkBody), the translation and the call built from the
// chat request it returns, for an agent's Messages request (Claude Code, 5.3 KB) and a Responses one
// (Codex's tool turn, 5.4 KB). BenchmarkEdge's translated rows hold the same work inside a whole
// request, where loopback HTTP dominates.
func BenchmarkTranslatedRequest(b *testing.B) {
	for _, c := range []struct {
		name, file string
		translate  func([]byte, translate.Options) (*translate.Chat, *translate.Error)
	}{
		{"messages-claude-code", "../../internal/translate/testdata/request/claude_code.messages.json",
			func(body []byte, o translate.Options) (*translate.Chat, *translate.Error) {
				c, _, e := translate.MessagesToChatWith(body, o)
				return c, e
			}},
		{"responses-codex-tool-turn", "../../internal/translate/testdata/responses/request/codex_tool_turn.request.json",
			func(body []byte, o translate.Options) (*translate.Chat, *translate.Error) {
				c, _, e := translate.ResponsesToChat(body, o)
				return c, e
			}},
	} {
		raw, err := os.ReadFile(c.file)
		if err != nil {
			b.Fatal(err)
		}
		// Compact, as an agent sends it (and make bench's agent rows): the files are indented to be read.
		var body bytes.Buffer
		if err := json.Compact(&body, raw); err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(body.Len()))
			for i := 0; i < b.N; i++ {
				fields, depth, e := walkBody(body.Bytes())
				if e != nil {
					b.Fatal(e.message)
				}
				chat, terr := c.translate(body.Bytes(), translate.Options{Checked: fields, CheckedDepth: depth})
				if terr != nil {
					b.Fatal(terr.Message)
				}
				if _, e := translatedCall(chat); e != nil {
					b.Fatal(e.message)
				}
			}
		})
	}
}
