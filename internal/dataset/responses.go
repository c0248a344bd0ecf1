package dataset

import (
	"encoding/json"

	"github.com/svcdev/svc/internal/conv"

	"github.com/svcdev/svc/internal/translate"
)

// item is an OpenAI Responses output item, of the kinds an answer holds.
type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     *string         `json:"input"` // a custom_tool_call's free text
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
}

// fromResponses reads a Responses run: its request as the edge reads it (its previous_response_id chain
// and its item references put in place from the stored runs, through opt.Previous, then
// internal/translate's reading, the earlier turns' instructions not carried over as with OpenAI), and
// its output items as the answer. A chain's later turn that sends no tools declares those of the turns
// before it (the newest definition of a name wins).
func fromResponses(r Run, opt Options) (conversation, error) {
	body := r.Request
	var turns []translate.Turn // newest first while walked
	seen := map[string]bool{}
	size := len(body)
	for prev := translate.PreviousResponseID(body); prev != ""; {
		if seen[prev] || len(seen) >= maxPrevious {
			return conversation{}, refuse(ReasonNoPrevious, "the previous_response_id chain loops or is too long")
		}
		seen[prev] = true
		turn, ok := stored(opt, prev)
		if !ok {
			return conversation{}, refuse(ReasonNoPrevious, "previous response %q is not stored", prev)
		}
		t := translate.Turn{Request: turn.Request, Response: turn.Response}
		if size += translate.TurnBytes(t); size > conv.MaxBytes {
			return conversation{}, refuse(ReasonTooLong, "the conversation is longer than %d MiB", conv.MaxBytes>>20)
		}
		turns = append(turns, t)
		prev = translate.PreviousResponseID(turn.Request)
	}
	oldestFirst := make([]translate.Turn, len(turns))
	for i, t := range turns {
		oldestFirst[len(turns)-1-i] = t
	}
	var terr *translate.Error
	if body, terr = translate.WithPrevious(body, oldestFirst); terr != nil {
		return conversation{}, refuse(ReasonUnparseable, "%s", terr.Error())
	}
	size = len(body)
	if refs := translate.ItemReferences(body); len(refs) > 0 {
		found := make(map[string]json.RawMessage, len(refs))
		for _, ref := range refs {
			turn, ok := stored(opt, ref.ResponseID)
			var it json.RawMessage
			if ok {
				it = translate.OutputItem(turn.Response, ref.ID)
			}
			if it == nil {
				return conversation{}, refuse(ReasonNoPrevious, "the item %q an item_reference names is not stored", ref.ID)
			}
			if size += len(it); size > conv.MaxBytes {
				return conversation{}, refuse(ReasonTooLong, "the conversation is longer than %d MiB", conv.MaxBytes>>20)
			}
			found[ref.ID] = it
		}
		if body, terr = translate.WithItems(body, found); terr != nil {
			return conversation{}, refuse(ReasonUnparseable, "%s", terr.Error())
		}
	}
	chat, info, terr := translate.ResponsesToChat(body, translate.Options{Secret: opt.Secret})
	if terr != nil {
		return conversation{}, refuse(ReasonUnsupported, "request: %s", terr.Error())
	}
	in := chat.Conversation
	names := map[string]bool{}
	for _, t := range in.Tools {
		names[t.Function.Name] = true
	}
	for _, t := range turns {
		tools, _ := translate.ResponsesTools(t.Request)
		for _, tl := range tools {
			if !names[tl.Function.Name] {
				names[tl.Function.Name] = true
				in.Tools = append(in.Tools, tl)
			}
		}
	}
	var resp struct {
		Output []item `json:"output"`
	}
	if err := json.Unmarshal(r.Response, &resp); err != nil {
		return conversation{}, refuse(ReasonUnparseable, "answer: %v", err)
	}
	answer, err := itemsToMessages(resp.Output)
	if err != nil {
		return conversation{}, err
	}
	if len(answer) != 1 || answer[0].Role != "assistant" {
		return conversation{}, refuse(ReasonEmpty, "the answer is not one assistant turn")
	}
	c, lerr := lineOf(in, answer[0], leftOutTools(info.Ignored))
	c.request = chat.Members
	return c, lerr
}

// stored is the answered Responses run of a response id, through opt.Previous.
func stored(opt Options, responseID string) (Run, bool) {
	if opt.Previous == nil || responseID == "" {
		return Run{}, false
	}
	turn, ok := opt.Previous(responseID)
	if !ok || turn.Status != "ok" || Detect(turn.Response) != SurfaceResponses {
		return Run{}, false
	}
	return turn, true
}

// itemsToMessages writes an answer's output items as chat messages: its message, function and custom
// tool calls and reasoning as one assistant message (a custom tool's text input as the arguments
// {"input": …}, the function the translation offers it as).
func itemsToMessages(items []item) ([]message, *Refused) {
	a := message{Role: "assistant"}
	var text builder
	for i, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message"
		}
		switch typ {
		case "message":
			if it.Role != "assistant" {
				return nil, refuse(ReasonUnparseable, "output[%d]: role %q", i, it.Role)
			}
			if err := responsesContent(&text, it.Content, false); err != nil {
				return nil, refuse(err.Reason, "output[%d]: %s", i, err.Detail)
			}
		case "function_call", "custom_tool_call":
			if it.CallID == "" || it.Name == "" {
				return nil, refuse(ReasonUnparseable, "output[%d]: a %s without its call_id or name", i, typ)
			}
			args := it.Arguments
			if typ == "custom_tool_call" {
				input := ""
				if it.Input != nil {
					input = *it.Input
				}
				b, _ := json.Marshal(map[string]string{"input": input})
				args = string(b)
			}
			a.ToolCalls = append(a.ToolCalls, toolCall{ID: it.CallID, Type: "function",
				Function: functionCall{Name: it.Name, Arguments: args}})
		case "reasoning":
			for _, s := range it.Summary {
				a.ReasoningContent += s.Text
			}
		default:
			return nil, refuse(ReasonUnsupported, "output[%d]: item %q cannot be written", i, typ)
		}
	}
	if s, _ := text.joined(); s != "" {
		a.Content = s
	}
	return []message{a}, nil
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
