package edge_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/mockupstream"
	"github.com/svcdev/svc/internal/translate"
)

// BenchmarkAgentEdge is make bench's agent rows (cmd/svcbench/agent.go) inside one process: an agent's
// whole request, streamed, on its own surface (Claude Code's Messages request, Codex's Responses tool
// turn) and the same conversation as the chat completions request the translation makes of it, through
// the whole server to the mock upstream (16 token chunks) on a deployment without run recording. Run it
// with -cpuprofile to see what a translated request costs beyond its relayed chat stream.
func BenchmarkAgentEdge(b *testing.B) {
	env := newEnv(b)
	env.mock.Configure(mockupstream.Config{APIKey: upstreamKey, Tokens: 16})
	_, key := env.deploy("bench-agent", base("up"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionNone, 0)
	host := "http://bench-agent." + env.srv.EndpointDomain
	for _, a := range []struct {
		name, file, path string
		messages         bool
	}{
		{"claude-code", "../../internal/translate/testdata/request/claude_code.messages.json", "/v1/messages", true},
		{"codex", "../../internal/translate/testdata/responses/request/codex_tool_turn.request.json", "/v1/responses", false},
	} {
		raw, err := os.ReadFile(a.file)
		if err != nil {
			b.Fatal(err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil {
			b.Fatal(err)
		}
		top["stream"] = json.RawMessage("true")
		body, _ := json.Marshal(top)
		var chat *translate.Chat
		var terr *translate.Error
		if a.messages {
			chat, _, terr = translate.MessagesToChatWith(body, translate.Options{})
		} else {
			chat, _, terr = translate.ResponsesToChat(body, translate.Options{})
		}
		if terr != nil {
			b.Fatal(terr.Message)
		}
		chatBody, _ := json.Marshal(chat.Members)
		b.Run(a.name+"/chat", func(b *testing.B) { postInParallel(b, env, host+"/v1/chat/completions", key, chatBody) })
		b.Run(a.name+"/translated", func(b *testing.B) { postInParallel(b, env, host+a.path, key, body) })
	}
}
