// Package dataset writes stored runs (chat completions, Anthropic Messages, OpenAI Responses) as lines of OpenAI's fine-tuning formats, and validates such lines.
package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/svcdev/svc/internal/conv"
)

// Run is a stored run as the conversion reads it: its status ("ok" or "error") and the request and
// answer as the edge recorded them (the body the caller sent; the answer in the surface's own form, a
// stream's assembled, with an "error" member beside the content when the stream was cut).
type Run struct {
	ID       string
	Status   string
	Request  []byte
	Response []byte
}

// Surface is the wire format a run came through. A run does not record it: Detect reads it from the
// recorded answer's own type.
type Surface string

const (
	SurfaceChat      Surface = "chat"      // OpenAI chat completions: a "chat.completion" answer
	SurfaceMessages  Surface = "messages"  // Anthropic Messages: a "message" answer
	SurfaceResponses Surface = "responses" // OpenAI Responses: a "response" answer
)

// Reason says why a run cannot be exported; the caller counts runs by it.
type Reason string

const (
	ReasonNoTranscript Reason = "no_transcript" // nothing recorded (retention none, or a usage-only run)
	ReasonFailed       Reason = "failed"        // the request failed before any answer
	ReasonCut          Reason = "cut"           // the answer was cut (a stream that ended in an error)
	ReasonUnparseable  Reason = "unparseable"   // the request or answer is not what its surface writes
	ReasonUnsupported  Reason = "unsupported"   // a surface or content the fine-tuning formats cannot hold
	ReasonNoPrevious   Reason = "no_previous"   // a Responses turn whose earlier turns are gone
	ReasonEmpty        Reason = "empty"         // an answer with neither text nor tool calls
	ReasonMismatch     Reason = "mismatch"      // a preference pair whose runs did not answer the same input
	ReasonTooLong      Reason = "too_long"      // a line, or the conversation it is made of, past conv.MaxBytes
	ReasonIdentical    Reason = "identical"     // a preference pair whose two answers are the same: it teaches nothing
)

// Refused is the error of a run the conversion leaves out: its reason, and what in the run caused it.
type Refused struct {
	Reason Reason
	Detail string
}

func (e *Refused) Error() string {
	if e.Detail == "" {
		return string(e.Reason)
	}
	return string(e.Reason) + ": " + e.Detail
}

func refuse(r Reason, format string, args ...any) *Refused {
	return &Refused{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// ReasonOf is the reason of an error the conversion returned ("" for nil).
func ReasonOf(err error) Reason {
	if err == nil {
		return ""
	}
	var r *Refused
	if errors.As(err, &r) {
		return r.Reason
	}
	return ReasonUnparseable
}

// Options choose what a line keeps.
type Options struct {
	// Reasoning keeps the answer's reasoning (Messages thinking blocks, Responses reasoning items,
	// chat reasoning_content) as the assistant messages' "reasoning_content". OpenAI's format has no
	// field for it, so it is off by default; with it, lines are for trainers that read that field.
	Reasoning bool
	// Cut exports a cut answer (a stream that ended in an error) with what it delivered.
	Cut bool
	// Previous returns the stored run of a Responses previous_response_id (the id as the request names
	// it), or of the response an item reference's item came from; nil, or false, leaves out runs that
	// continue an earlier response.
	Previous func(responseID string) (Run, bool)
	// Secret is the key svc signs thinking blocks with (translate.Options.Secret): thinking a Messages
	// history gives back is reasoning only when svc signed it, as the edge read it.
	Secret []byte
}

// maxPrevious bounds a chain of previous_response_id (and so a cycle of them).
const maxPrevious = 256

// Detect returns the surface of a run from its recorded answer's type, or "" when it is none of the
// three (a failed run's error envelope, a text completion, an embedding).
func Detect(response []byte) Surface {
	var head struct {
		Object string `json:"object"`
		Type   string `json:"type"`
	}
	if json.Unmarshal(response, &head) != nil {
		return ""
	}
	switch {
	case head.Object == "chat.completion":
		return SurfaceChat
	case head.Object == "response":
		return SurfaceResponses
	case head.Type == "message":
		return SurfaceMessages
	}
	return ""
}

// Check says why a run cannot be exported without converting it, "" when it may be: no transcript, a
// failure, a cut answer (unless opt.Cut), or an answer of no known surface. Conversion may still
// refuse a run Check passes (its content), with a *Refused.
func Check(r Run, opt Options) Reason {
	_, why := check(r, opt)
	return why
}

// check is Check, with the run's surface when it may be exported.
func check(r Run, opt Options) (Surface, Reason) {
	if len(bytes.TrimSpace(r.Request)) == 0 || len(bytes.TrimSpace(r.Response)) == 0 {
		return "", ReasonNoTranscript
	}
	s := Detect(r.Response)
	if r.Status != "ok" {
		if s == "" {
			return "", ReasonFailed
		}
		if !opt.Cut {
			return "", ReasonCut
		}
	}
	if s == "" {
		if !json.Valid(r.Response) {
			return "", ReasonUnparseable
		}
		return "", ReasonUnsupported
	}
	return s, ""
}

// ChatLine converts a run to one line of OpenAI's chat fine-tuning format, {"messages": [...],
// "tools": [...]}, without its newline: the conversation the run was asked, in chat form, and its
// answer as the last assistant message. A run it leaves out gives a *Refused.
func ChatLine(r Run, opt Options) ([]byte, error) {
	c, err := convert(r, opt)
	if err != nil {
		return nil, err
	}
	return bounded(encode(chatLine{Messages: append(c.messages, c.answer), Tools: c.tools}))
}

// bounded refuses a line longer than conv.MaxBytes (docs/OPERATIONS.md, "Bounds"), as too_long.
func bounded(line []byte, err error) ([]byte, error) {
	if err == nil && len(line) > conv.MaxBytes {
		return nil, refuse(ReasonTooLong, "the line is longer than %d MiB", conv.MaxBytes>>20)
	}
	return line, err
}

// PreferenceLine converts two runs that answered the same input (a primary and its shadow copy) to one
// line of OpenAI's preference format: {"input": {"messages", "tools"}, "preferred_output":
// [assistant], "non_preferred_output": [assistant]}. OpenAI's preference tuning takes text outputs
// only, so a pair in which either answer is a tool call, or empty, is refused.
func PreferenceLine(preferred, nonPreferred Run, opt Options) ([]byte, error) {
	p, err := convert(preferred, opt)
	if err != nil {
		return nil, err
	}
	n, err := convert(nonPreferred, opt)
	if err != nil {
		return nil, err
	}
	pin, err := encode(chatLine{Messages: p.messages, Tools: p.tools})
	if err != nil {
		return nil, err
	}
	nin, err := encode(chatLine{Messages: n.messages, Tools: n.tools})
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(pin, nin) {
		return nil, refuse(ReasonMismatch, "the two runs were not asked the same conversation")
	}
	return preference(p, p.answer, n.answer)
}

// EvalPreferenceLine converts a replay eval's judged pair (docs/API.md, "Evals") to one preference
// line, as PreferenceLine writes it: the source run's conversation as the input, and the candidate's
// answer to its replay (a chat completion, as replays are answered) preferred to the run's recorded
// answer when candidatePreferred, else the other way round.
func EvalPreferenceLine(source Run, candidate []byte, candidatePreferred bool, opt Options) ([]byte, error) {
	c, err := convert(source, opt)
	if err != nil {
		return nil, err
	}
	a, err := fromChatAnswer(candidate)
	if err != nil {
		return nil, err
	}
	if !opt.Reasoning {
		a.ReasoningContent = ""
	}
	if a.Content == nil && len(a.ToolCalls) == 0 {
		return nil, refuse(ReasonEmpty, "the candidate's answer has neither text nor tool calls")
	}
	if candidatePreferred {
		return preference(c, a, c.answer)
	}
	return preference(c, c.answer, a)
}

// preference writes the preference line of a conversation and two answers to it, refusing what
// OpenAI's preference tuning cannot take: images in the input, tool calls in an output, and two
// answers alike (a pair that teaches nothing).
func preference(in conversation, preferred, other message) ([]byte, error) {
	for _, m := range in.messages {
		if parts, ok := m.Content.([]part); ok {
			for _, pt := range parts {
				if pt.Type != "text" {
					return nil, refuse(ReasonUnsupported, "preference inputs must be text, not images")
				}
			}
		}
	}
	for _, a := range []message{preferred, other} {
		if len(a.ToolCalls) > 0 {
			return nil, refuse(ReasonUnsupported, "preference outputs must be text, not tool calls")
		}
	}
	if pa, na := encodeMessage(preferred), encodeMessage(other); bytes.Equal(pa, na) {
		return nil, refuse(ReasonIdentical, "the preferred and the other answer are the same")
	}
	return bounded(encode(preferenceLine{Input: chatLine{Messages: in.messages, Tools: in.tools},
		Preferred: []message{preferred}, NonPreferred: []message{other}}))
}

type chatLine struct {
	Messages []message `json:"messages"`
	Tools    []tool    `json:"tools,omitempty"`
}

type preferenceLine struct {
	Input        chatLine  `json:"input"`
	Preferred    []message `json:"preferred_output"`
	NonPreferred []message `json:"non_preferred_output"`
}

// message is a chat message as the fine-tuning formats write it. Content is a string, or a list of
// parts when it holds an image or more than one text part; nil for an assistant turn of tool calls only.
type message struct {
	Role             string     `json:"role"`
	Content          any        `json:"content,omitempty"`
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCall `json:"tool_calls,omitempty"`
	ToolCallID       string     `json:"tool_call_id,omitempty"`
}

type part struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
}

type imageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type tool struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// conversation is a run in chat form: what it was asked, its tools and its answer.
type conversation struct {
	messages []message
	tools    []tool
	answer   message
	// in is the request's conversation as conv reads it, request its members in chat form (the body a
	// chat model was sent, before svc set its model and stream options): what a replay sends again.
	in      conv.Conversation
	request map[string]json.RawMessage
}

func convert(r Run, opt Options) (conversation, error) {
	surface, why := check(r, opt)
	if why != "" {
		return conversation{}, &Refused{Reason: why}
	}
	var c conversation
	var err error
	switch surface {
	case SurfaceChat:
		c, err = fromChat(r, opt)
	case SurfaceMessages:
		c, err = fromMessages(r, opt)
	default:
		c, err = fromResponses(r, opt)
	}
	if err != nil {
		return conversation{}, err
	}
	if !opt.Reasoning {
		for i := range c.messages {
			c.messages[i].ReasoningContent = ""
		}
		c.answer.ReasoningContent = ""
	}
	if c.answer.Content == nil && len(c.answer.ToolCalls) == 0 {
		return conversation{}, refuse(ReasonEmpty, "the answer has neither text nor tool calls")
	}
	if len(c.messages) == 0 {
		return conversation{}, refuse(ReasonUnparseable, "the request holds no messages")
	}
	if err := paired(c.messages, c.answer, c.tools); err != nil {
		return conversation{}, err
	}
	return c, nil
}

// paired refuses a conversation the fine-tuning format cannot hold although each message reads: an
// empty assistant turn, a tool call without its result, a result without its call, an id used twice,
// a function name OpenAI does not take.
func paired(msgs []message, answer message, tools []tool) *Refused {
	names := map[string]bool{}
	for _, t := range tools {
		if !toolName.MatchString(t.Function.Name) || names[t.Function.Name] {
			return refuse(ReasonUnsupported, "tool %q: a name OpenAI does not take, or defined twice", t.Function.Name)
		}
		names[t.Function.Name] = true
	}
	ids := map[string]bool{}
	pending := map[string]bool{}
	for i, m := range msgs {
		if m.Role != "tool" && len(pending) > 0 {
			return refuse(ReasonUnparseable, "message %d: a tool call before it has no result", i)
		}
		switch m.Role {
		case "assistant":
			if m.Content == nil && len(m.ToolCalls) == 0 {
				return refuse(ReasonEmpty, "message %d: an assistant turn with neither text nor tool calls", i)
			}
			for _, tc := range m.ToolCalls {
				if !toolName.MatchString(tc.Function.Name) {
					return refuse(ReasonUnsupported, "message %d: a tool call's name OpenAI does not take", i)
				}
				if tc.ID == "" || ids[tc.ID] {
					return refuse(ReasonUnparseable, "message %d: a tool call id missing or used twice", i)
				}
				ids[tc.ID], pending[tc.ID] = true, true
			}
		case "tool":
			if !pending[m.ToolCallID] {
				return refuse(ReasonUnparseable, "message %d: a tool result that answers no call before it", i)
			}
			delete(pending, m.ToolCallID)
		}
	}
	if len(pending) > 0 {
		return refuse(ReasonUnparseable, "a tool call of the last turn has no result")
	}
	for _, tc := range answer.ToolCalls {
		if !toolName.MatchString(tc.Function.Name) {
			return refuse(ReasonUnsupported, "the answer: a tool call's name OpenAI does not take")
		}
		if tc.ID == "" || ids[tc.ID] {
			return refuse(ReasonUnparseable, "the answer: a tool call id missing or used twice")
		}
		ids[tc.ID] = true
	}
	return nil
}

// encodeMessage is an answer as a line writes it, for comparing two.
func encodeMessage(m message) []byte {
	b, _ := encode(m)
	return b
}

// encode writes v as one line of JSON, without escaping HTML characters (the text stays readable).
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, refuse(ReasonUnparseable, "%v", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// builder gathers a message's content: text parts and images, written as a string when it is one text.
type builder struct {
	parts []part
}

func (b *builder) text(s string) {
	if s != "" {
		b.parts = append(b.parts, part{Type: "text", Text: s})
	}
}

func (b *builder) image(url, detail string) {
	if detail != "low" && detail != "high" && detail != "auto" {
		detail = "" // a hint the format takes only as one of these
	}
	b.parts = append(b.parts, part{Type: "image_url", ImageURL: &imageURL{URL: url, Detail: detail}})
}

func (b *builder) empty() bool { return len(b.parts) == 0 }

// contentOrEmpty is the gathered content, "" rather than nil for a user turn that said nothing.
func contentOrEmpty(b *builder) any {
	if c := b.content(); c != nil {
		return c
	}
	return ""
}

// content is the gathered content: nil when empty, a string for one text part, else the parts.
func (b *builder) content() any {
	switch {
	case len(b.parts) == 0:
		return nil
	case len(b.parts) == 1 && b.parts[0].Type == "text":
		return b.parts[0].Text
	}
	return b.parts
}

// joined is the gathered text as one string (tool results, which hold text only).
func (b *builder) joined() (string, bool) {
	var s string
	for _, p := range b.parts {
		if p.Type != "text" {
			return "", false
		}
		s += p.Text
	}
	return s, true
}

// argumentsOf is a tool call's arguments as the chat format holds them: a JSON string.
func argumentsOf(input json.RawMessage) string {
	input = bytes.TrimSpace(input)
	if len(input) == 0 || string(input) == "null" {
		return "{}"
	}
	var compact bytes.Buffer
	if json.Compact(&compact, input) != nil {
		return string(input)
	}
	return compact.String()
}
