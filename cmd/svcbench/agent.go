package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/svcdev/svc/internal/bench"
	"github.com/svcdev/svc/internal/translate"
)

// The agent rows (docs/OPERATIONS.md, "Overhead"): an agent's whole request, streamed, on its own
// surface (Claude Code's Messages request, 5.3 KB with its tools; Codex's Responses tool turn, 5.4 KB)
// against the same conversation sent as chat completions, the one the edge's translation makes of it,
// on the same deployment: both ask the upstream the same chat completion and read the same chunks, so
// that the CPU ratio per request is what the translation costs a request of an agent's size.
var agentRequests = []struct {
	name, file string
	surface    bench.Surface
}{
	{"claude code", "internal/translate/testdata/request/claude_code.messages.json", bench.SurfaceMessages},
	{"codex", "internal/translate/testdata/responses/request/codex_tool_turn.request.json", bench.SurfaceResponses},
}

// agentRows returns, for each agent request, its translated row and the chat row it is judged against,
// on the deployment of the row like (its host, key and process).
func agentRows(like *bench.Row) ([]*bench.Row, error) {
	var rows []*bench.Row
	for _, a := range agentRequests {
		raw, err := os.ReadFile(a.file)
		if err != nil {
			return nil, fmt.Errorf("agent row %s: %w (run the bench from the repository's root)", a.name, err)
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil {
			return nil, fmt.Errorf("agent row %s: %w", a.name, err)
		}
		top["stream"] = json.RawMessage("true")
		body, _ := json.Marshal(top)
		var chat *translate.Chat
		var terr *translate.Error
		if a.surface == bench.SurfaceMessages {
			chat, _, terr = translate.MessagesToChatWith(body, translate.Options{})
		} else {
			chat, _, terr = translate.ResponsesToChat(body, translate.Options{})
		}
		if terr != nil {
			return nil, fmt.Errorf("agent row %s: %s", a.name, terr.Message)
		}
		chatBody, _ := json.Marshal(chat.Members)
		c := &bench.Row{Name: "edge, chat (" + a.name + ")", URL: like.URL, Host: like.Host, Key: like.Key, PID: like.PID, Body: chatBody}
		t := &bench.Row{Name: "edge, " + a.surface.String() + " (" + a.name + ")", URL: trimChatPath(like.URL) + a.surface.Path(),
			Host: like.Host, Key: like.Key, PID: like.PID, Edge: true, Surface: a.surface, Chat: c, Body: body, Budget: bench.BudgetTranslatedAgent}
		rows = append(rows, c, t)
	}
	return rows, nil
}

// trimChatPath is a row's base URL: its URL without the chat completions route.
func trimChatPath(url string) string {
	const p = "/v1/chat/completions"
	if len(url) >= len(p) && url[len(url)-len(p):] == p {
		return url[:len(url)-len(p)]
	}
	return url
}
