package translate

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// BenchmarkAgentAnswer is BenchmarkMessagesAnswer and BenchmarkResponsesAnswer for an agent's whole
// request (make bench's agent rows): Claude Code's Messages request and Codex's Responses tool turn,
// translated, then a streamed answer of 16 token chunks translated into the surface's events.
func BenchmarkAgentAnswer(b *testing.B) {
	claude, codex := agentBody(b, "testdata/request/claude_code.messages.json"), agentBody(b, "testdata/responses/request/codex_tool_turn.request.json")
	b.Run("messages-claude-code", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var s *Stream
			benchAnswer(b, func() error {
				_, info, err := MessagesToChatWith(claude, Options{})
				if err != nil {
					return err
				}
				s = NewStream("m", info, info.InputTokensEstimate())
				return nil
			}, func(c *StreamChunk) ([]Event, error) { return s.Add(c) }, func() ([]Event, error) { return s.Finish() })
		}
	})
	b.Run("responses-codex", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var s *ResponsesStream
			benchAnswer(b, func() error {
				_, info, err := ResponsesToChat(codex, Options{})
				if err != nil {
					return err
				}
				s = NewResponsesStream("resp_bench", "m", 1, info, info.InputTokensEstimate())
				return nil
			}, func(c *StreamChunk) ([]Event, error) { return s.Add(c) }, func() ([]Event, error) { return s.Finish() })
		}
	})
}

// agentBody is an agent's request of testdata, compact as the agent sends it (and make bench's agent
// rows): the files are indented to be read.
func agentBody(b testing.TB, file string) []byte {
	b.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	var body bytes.Buffer
	if err := json.Compact(&body, raw); err != nil {
		b.Fatal(err)
	}
	return body.Bytes()
}
