package dataset

import (
	"encoding/json"
)

// item is an OpenAI Responses input or output item, of the kinds a conversation holds.
type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

type responsesRequest struct {
	Instructions       json.RawMessage `json:"instructions"`
	Input              json.RawMessage `json:"input"`
	PreviousResponseID string          `json:"previous_response_id"`
	Tools              []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"tools"`
}

type responsesAnswer struct {
	Output []item `json:"output"`
}

// fromResponses reads a Responses run: the turns before it (its previous_response_id chain, through
// opt.Previous), its instructions as the system message, its input items and tools, and its output
// items as the answer. As OpenAI does, the earlier turns' instructions are not carried over.
func fromResponses(r Run, opt Options) (conversation, error) {
	var req responsesRequest
	if err := json.Unmarshal(r.Request, &req); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "request: %v", err)
	}
	var resp responsesAnswer
	if err := json.Unmarshal(r.Response, &resp); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "answer: %v", err)
	}
	var c conversation
	for i, t := range req.Tools {
		if t.Type != "function" || t.Name == "" {
			return conversation{}, refuse(ReasonUnsupported, "tools[%d]: only function tools can be written", i)
		}
		c.tools = append(c.tools, compactTool(tool{Type: "function",
			Function: functionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}}))
	}
	if len(req.Instructions) > 0 && string(req.Instructions) != "null" {
		var s string
		if json.Unmarshal(req.Instructions, &s) != nil {
			return conversation{}, refuse(ReasonUnsupported, "instructions: only text can be written")
		}
		if s != "" {
			c.messages = append(c.messages, message{Role: "system", Content: s})
		}
	}
	var earlier [][]item // oldest last, as the chain is walked
	seen := map[string]bool{}
	for prev := req.PreviousResponseID; prev != ""; {
		if seen[prev] || len(seen) >= maxPrevious {
			return conversation{}, refuse(ReasonNoPrevious, "the previous_response_id chain loops or is too long")
		}
		seen[prev] = true
		var turn Run
		ok := false
		if opt.Previous != nil {
			turn, ok = opt.Previous(prev)
		}
		if !ok || turn.Status != "ok" || Detect(turn.Response) != SurfaceResponses {
			return conversation{}, refuse(ReasonNoPrevious, "previous response %q is not stored", prev)
		}
		var treq responsesRequest
		var tresp responsesAnswer
		if json.Unmarshal(turn.Request, &treq) != nil || json.Unmarshal(turn.Response, &tresp) != nil {
			return conversation{}, refuse(ReasonUnparseable, "previous response %q", prev)
		}
		in, err := inputItems(treq.Input)
		if err != nil {
			return conversation{}, err
		}
		earlier = append(earlier, append(in, tresp.Output...))
		prev = treq.PreviousResponseID
	}
	var items []item
	for i := len(earlier) - 1; i >= 0; i-- {
		items = append(items, earlier[i]...)
	}
	in, err := inputItems(req.Input)
	if err != nil {
		return conversation{}, err
	}
	msgs, err := itemsToMessages(append(items, in...))
	if err != nil {
		return conversation{}, err
	}
	c.messages = append(c.messages, msgs...)
	answer, err := itemsToMessages(resp.Output)
	if err != nil {
		return conversation{}, err
	}
	if len(answer) != 1 || answer[0].Role != "assistant" {
		return conversation{}, refuse(ReasonEmpty, "the answer is not one assistant turn")
	}
	c.answer = answer[0]
	return c, nil
}

// inputItems reads a Responses input: a string (one user message) or items.
func inputItems(raw json.RawMessage) ([]item, *Refused) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		text, _ := json.Marshal(s)
		return []item{{Type: "message", Role: "user", Content: text}}, nil
	}
	var items []item
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, refuse(ReasonUnparseable, "input: %v", err)
	}
	return items, nil
}

// itemsToMessages writes items as chat messages: consecutive assistant items (its messages, function
// calls and reasoning) as one assistant message, function call outputs as tool messages.
func itemsToMessages(items []item) ([]message, *Refused) {
	var out []message
	var a *message // the assistant message being gathered
	var text builder
	flush := func() {
		if a != nil {
			if s, _ := text.joined(); s != "" {
				a.Content = s
			}
			out = append(out, *a)
			a, text = nil, builder{}
		}
	}
	assistant := func() *message {
		if a == nil {
			a = &message{Role: "assistant"}
		}
		return a
	}
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			if it.Role == "assistant" {
				assistant()
				if err := responsesContent(&text, it.Content, false); err != nil {
					return nil, refuse(err.Reason, "items[%d]: %s", i, err.Detail)
				}
				continue
			}
			flush()
			role := it.Role
			switch role {
			case "developer":
				role = "system"
			case "user", "system":
			default:
				return nil, refuse(ReasonUnparseable, "items[%d]: role %q", i, it.Role)
			}
			var b builder
			if err := responsesContent(&b, it.Content, role == "user"); err != nil {
				return nil, refuse(err.Reason, "items[%d]: %s", i, err.Detail)
			}
			if role == "system" {
				s, ok := b.joined()
				if !ok {
					return nil, refuse(ReasonUnsupported, "items[%d]: a system message holds more than text", i)
				}
				out = append(out, message{Role: role, Content: s})
				continue
			}
			out = append(out, message{Role: role, Content: contentOrEmpty(&b)})
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, refuse(ReasonUnparseable, "items[%d]: a function_call without its call_id or name", i)
			}
			m := assistant()
			m.ToolCalls = append(m.ToolCalls, toolCall{ID: it.CallID, Type: "function",
				Function: functionCall{Name: it.Name, Arguments: it.Arguments}})
		case "reasoning":
			m := assistant()
			for _, s := range it.Summary {
				m.ReasoningContent += s.Text
			}
		case "function_call_output":
			flush()
			var b builder
			if err := responsesContent(&b, it.Output, false); err != nil {
				return nil, refuse(err.Reason, "items[%d]: %s", i, err.Detail)
			}
			s, ok := b.joined()
			if !ok {
				return nil, refuse(ReasonUnsupported, "items[%d]: a function_call_output holds more than text", i)
			}
			out = append(out, message{Role: "tool", ToolCallID: it.CallID, Content: s})
		default:
			return nil, refuse(ReasonUnsupported, "items[%d]: item %q cannot be written", i, typ)
		}
	}
	flush()
	return out, nil
}

// responsesContent reads a Responses message's content (a string or parts: input_text, output_text,
// refusal, and input_image when images are allowed).
func responsesContent(b *builder, raw json.RawMessage, images bool) *Refused {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		b.text(s)
		return nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Refusal  string `json:"refusal"`
		ImageURL string `json:"image_url"`
		Detail   string `json:"detail"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return refuse(ReasonUnparseable, "content: %v", err)
	}
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			b.text(p.Text)
		case "refusal":
			b.text(p.Refusal)
		case "input_image":
			if !images || p.ImageURL == "" {
				return refuse(ReasonUnsupported, "an image that is not a user message's image_url")
			}
			detail := p.Detail
			if detail == "auto" {
				detail = ""
			}
			b.image(p.ImageURL, detail)
		default:
			return refuse(ReasonUnsupported, "content part %q cannot be written", p.Type)
		}
	}
	return nil
}
