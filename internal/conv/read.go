package conv

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"

	"github.com/svcdev/svc/internal/jsonx"
)

// The readings of a request body on the edge's request path: one walk over its members, without
// building the typed conversation (conv.go) that the translations and the export build.

// Turn is one chat message as the edge's chat path judges it: its role, its text (Text's rule), whether
// it has content at all (not null), and whether it calls tools.
type Turn struct {
	Role       string
	Text       string
	HasContent bool
	ToolCalls  bool
}

// ErrNoMessages is the error of a chat request without messages (absent or null).
var ErrNoMessages = errors.New("messages is required")

// ChatTurns calls fn with each turn of a chat request's members, in order (EachTurn), and returns
// ErrNoMessages when it has no messages (absent or null).
func ChatTurns(fields map[string]json.RawMessage, fn func(t Turn) bool) error {
	raw, ok := fields["messages"]
	if !ok || string(raw) == "null" {
		return ErrNoMessages
	}
	return EachTurn(raw, fn)
}

// Turns reads a chat request's "messages" (valid JSON): each entry's role, text and tool calls
// (EachTurn).
func Turns(raw []byte) ([]Turn, error) {
	var turns []Turn
	err := EachTurn(raw, func(t Turn) bool { turns = append(turns, t); return true })
	return turns, err
}

// EachTurn reads "messages" (valid JSON) in one walk, calling fn with each entry's role, text and tool
// calls until it returns false. ErrShape when it is not an array of objects (null entries read as
// entries without a role).
func EachTurn(raw []byte, fn func(t Turn) bool) error {
	c := jsonx.NewCursor(raw)
	if c.Kind() != '[' {
		return ErrShape
	}
	var err error
	stop := false
	c.Array(func() {
		if err != nil || stop {
			return
		}
		var role, content, toolCalls []byte
		switch c.Kind() {
		case '{':
			role, content, toolCalls = turnMembers(c)
		case 'n': // null: an entry without a role
		default:
			err = ErrShape
			return
		}
		if len(role) > 0 && role[0] != '"' && string(role) != "null" {
			err = ErrShape
			return
		}
		text, ok := ContentText(content)
		stop = !fn(Turn{Role: jsonx.String(role), Text: text, HasContent: ok,
			ToolCalls: len(toolCalls) > 0 && string(toolCalls) != "null"})
	})
	return err
}

// surfaceTurns calls fn with the role and raw content of each turn of a body's conversation (valid
// JSON), whatever the surface: chat's and Messages' "messages", Responses' "input" (a string is one
// user turn), until fn returns false.
func surfaceTurns(fields map[string]json.RawMessage, fn func(role string, content []byte) bool) {
	list := fields["messages"]
	if len(list) == 0 {
		list = fields["input"]
		if len(list) > 0 && list[0] == '"' {
			fn("user", list)
			return
		}
	}
	if len(list) == 0 || list[0] != '[' {
		return
	}
	c := jsonx.NewCursor(list)
	more := true
	c.Array(func() {
		if !more || c.Kind() != '{' {
			return
		}
		role, content, _ := turnMembers(c)
		more = fn(jsonx.String(role), content)
	})
}

// turnMembers reads the members of a turn at the cursor (an object) that its reading needs.
func turnMembers(c *jsonx.Cursor) (role, content, toolCalls []byte) {
	c.Object(func(name []byte) {
		switch string(name) {
		case "role":
			role = c.Raw()
		case "content":
			content = c.Raw()
		case "tool_calls":
			toolCalls = c.Raw()
		}
	})
	return role, content, toolCalls
}

// textPart says whether a content part of this type holds the turn's text: chat's and Messages' "text",
// Responses' "input_text" and "output_text".
func textPart(typ string) bool {
	return typ == "text" || typ == "input_text" || typ == "output_text"
}

// ContentText is the text of a raw content (valid JSON) by Text's rule: a string, or the text parts of
// an array joined by newlines; false when there is no content (absent or null) or it is neither.
func ContentText(raw []byte) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	if raw[0] == '"' {
		return jsonx.String(raw), true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if textPart(p.Type) {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(p.Text)
		}
	}
	return b.String(), true
}

// Opening is the text of a conversation's first system (or developer) message and first user message,
// whatever the surface: chat's and Messages' "messages" (Messages' system prompt apart, in "system"),
// Responses' "instructions" and "input" (a string, or items); what keys a session that names itself no
// other way (edgemodel.SessionOf). Only text counts, so that what clients change between turns
// (cache_control marks, images re-encoded) does not move a session.
func Opening(fields map[string]json.RawMessage) string {
	var system, user string
	if raw := fields["system"]; len(raw) > 0 {
		system, _ = ContentText(raw)
	}
	if raw := fields["instructions"]; len(raw) > 0 && system == "" {
		system, _ = ContentText(raw)
	}
	surfaceTurns(fields, func(role string, content []byte) bool {
		switch role {
		case "system", "developer":
			if system == "" {
				system, _ = ContentText(content)
			}
		case "user":
			user, _ = ContentText(content)
		}
		return user == ""
	})
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(system)))
	b = append(b, system...)
	return string(append(b, user...))
}

// promptFields are the members of a request body, of any surface, that hold its prompt.
var promptFields = [...]string{"messages", "system", "tools", "input", "instructions"}

// PromptChars counts the bytes of prompt text in a request body of any surface (chat, Messages,
// Responses), for svc's estimate of a call whose upstream reported no usage: under the prompt's members
// (messages, system, tools, input, instructions), the strings that hold text (text, content, system,
// thinking, instructions, name, description, arguments, input, output) and the size of tool schemas and
// inputs. Roles, types, ids, signatures and media (images in base64) do not count.
func PromptChars(body map[string]json.RawMessage) int {
	n := 0
	for _, k := range promptFields {
		if raw, ok := body[k]; ok {
			n += textChars(jsonx.NewCursor(raw), true, 0)
		}
	}
	return n
}

// textChars counts the text of the value at the cursor (see PromptChars); text says whether a string
// there counts. Values nested deeper than prompts are (a bound on the recursion) are skipped.
func textChars(c *jsonx.Cursor, text bool, depth int) int {
	n := 0
	kind := c.Kind()
	if depth > 32 && (kind == '{' || kind == '[') {
		c.Raw()
		return 0
	}
	depth++
	switch kind {
	case '"':
		s, e := c.Span()
		if text && s >= 0 {
			n = e - s - 2
		}
	case '{':
		c.Object(func(name []byte) {
			switch string(name) {
			case "text", "content", "system", "thinking", "instructions", "name", "description", "arguments", "output":
				n += textChars(c, true, depth)
			case "input", "input_schema", "parameters":
				if k := c.Kind(); k == '{' || k == '[' {
					if s, e := c.Span(); s >= 0 {
						n += e - s // a schema or a tool's input: its JSON, as the model reads it
					}
					return
				}
				n += textChars(c, true, depth)
			default:
				n += textChars(c, false, depth)
			}
		})
	case '[':
		c.Array(func() { n += textChars(c, text, depth) })
	default:
		c.Raw()
	}
	return n
}

// Preview is the text of the last user message of a request body of any surface (chat's and Messages'
// "messages", Responses' "input", a string or items), whitespace collapsed and cut to at most max
// runes with "…" (at a word's end when one is near): what a run listing shows of what was asked. "" when the body holds no user text.
func Preview(body []byte, max int) string {
	if !json.Valid(body) {
		return ""
	}
	var text string
	surfaceTurns(jsonx.Object(body), func(role string, content []byte) bool {
		if role == "user" {
			if t, ok := ContentText(content); ok && strings.TrimSpace(t) != "" {
				text = t
			}
		}
		return true
	})
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > max {
		cut := string(r[:max-1])
		if i := strings.LastIndexByte(cut, ' '); i > len(cut)/2 {
			cut = cut[:i] // at a word's end when one is near
		}
		text = cut + "…"
	}
	return text
}
