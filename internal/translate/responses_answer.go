package translate

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/svcdev/svc/internal/jsonx"
)

// The Responses API's response object, as OpenAI sends it (openai-node's Response type): the
// request's settings echoed around the output and usage.
type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       json.RawMessage    `json:"instructions"`
	MaxOutputTokens    json.RawMessage    `json:"max_output_tokens"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID json.RawMessage    `json:"previous_response_id"`
	Reasoning          json.RawMessage    `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        json.RawMessage    `json:"temperature"`
	Text               json.RawMessage    `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              json.RawMessage    `json:"tools"`
	TopP               json.RawMessage    `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *responseUsage     `json:"usage"`
	User               json.RawMessage    `json:"user,omitempty"`
	Metadata           json.RawMessage    `json:"metadata"`
}

// appendJSON appends r as encoding/json writes it (the same members in the same order), by hand. The
// request's settings the response echoes (instructions and tools: an agent's run to tens of KB) were
// compacted once when the request was read and are written as they are, where json.Marshal would check
// and compact them again for each of the three events of a stream that carry the response.
func (r *responseObject) appendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, r.ID)
	b = append(b, `,"object":`...)
	b = jsonx.AppendString(b, r.Object)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, r.CreatedAt, 10)
	b = append(b, `,"status":`...)
	b = jsonx.AppendString(b, r.Status)
	b = append(b, `,"background":`...)
	b = strconv.AppendBool(b, r.Background)
	b = r.Error.appendJSON(append(b, `,"error":`...))
	b = r.IncompleteDetails.appendJSON(append(b, `,"incomplete_details":`...))
	b = appendRaw(append(b, `,"instructions":`...), r.Instructions)
	b = appendRaw(append(b, `,"max_output_tokens":`...), r.MaxOutputTokens)
	b = append(b, `,"model":`...)
	b = jsonx.AppendString(b, r.Model)
	b = append(b, `,"output":[`...)
	for i, item := range r.Output {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMarshaled(b, item)
	}
	b = append(b, `],"parallel_tool_calls":`...)
	b = strconv.AppendBool(b, r.ParallelToolCalls)
	b = appendRaw(append(b, `,"previous_response_id":`...), r.PreviousResponseID)
	b = appendRaw(append(b, `,"reasoning":`...), r.Reasoning)
	b = append(b, `,"store":`...)
	b = strconv.AppendBool(b, r.Store)
	b = appendRaw(append(b, `,"temperature":`...), r.Temperature)
	b = appendRaw(append(b, `,"text":`...), r.Text)
	b = appendRaw(append(b, `,"tool_choice":`...), r.ToolChoice)
	b = appendRaw(append(b, `,"tools":`...), r.Tools)
	b = appendRaw(append(b, `,"top_p":`...), r.TopP)
	b = append(b, `,"truncation":`...)
	b = jsonx.AppendString(b, r.Truncation)
	b = r.Usage.appendJSON(append(b, `,"usage":`...))
	if len(r.User) > 0 {
		b = appendRaw(append(b, `,"user":`...), r.User)
	}
	b = appendRaw(append(b, `,"metadata":`...), r.Metadata)
	return append(b, '}')
}

// sizeHint is about the length of r's JSON, so that it is written into one buffer: the echoed
// settings, the output's text and a margin for the rest.
func (r *responseObject) sizeHint() int {
	n := 640 + len(r.Instructions) + len(r.Tools) + len(r.Text) + len(r.Reasoning) + len(r.Metadata) + len(r.ToolChoice) + len(r.User)
	for _, item := range r.Output {
		switch it := item.(type) {
		case outputMessage:
			for _, c := range it.Content {
				n += 128 + len(c.Text)
			}
		case reasoningItem:
			for _, c := range it.Content {
				n += 128 + len(c.Text) + len(it.EncryptedContent)
			}
		case functionCallItem:
			n += 160 + len(it.Arguments)
		default:
			n += 160
		}
	}
	return n
}

// appendRaw appends a raw JSON value read from a request (compacted), null when there is none.
func appendRaw(b []byte, raw json.RawMessage) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// appendMarshaled appends v as encoding/json writes it (null for a nil pointer): by its own appender
// where it has one (responses_json.go).
func appendMarshaled(b []byte, v any) []byte {
	if a, ok := v.(appender); ok {
		return a.appendJSON(b)
	}
	return appendMarshaledValue(b, v)
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

// The appenders of a response's error, incomplete details and usage write what json.Marshal writes
// (null for none), by hand: every response a stream sends carries the three.

func (e *responseError) appendJSON(b []byte) []byte {
	if e == nil {
		return append(b, "null"...)
	}
	b = jsonx.AppendString(append(b, `{"code":`...), e.Code)
	return append(jsonx.AppendString(append(b, `,"message":`...), e.Message), '}')
}

func (d *incompleteDetails) appendJSON(b []byte) []byte {
	if d == nil {
		return append(b, "null"...)
	}
	return append(jsonx.AppendString(append(b, `{"reason":`...), d.Reason), '}')
}

func (u *responseUsage) appendJSON(b []byte) []byte {
	if u == nil {
		return append(b, "null"...)
	}
	b = strconv.AppendInt(append(b, `{"input_tokens":`...), int64(u.InputTokens), 10)
	b = strconv.AppendInt(append(b, `,"input_tokens_details":{"cached_tokens":`...), int64(u.InputTokensDetails.CachedTokens), 10)
	b = strconv.AppendInt(append(b, `},"output_tokens":`...), int64(u.OutputTokens), 10)
	b = strconv.AppendInt(append(b, `,"output_tokens_details":{"reasoning_tokens":`...), int64(u.OutputTokensDetails.ReasoningTokens), 10)
	b = strconv.AppendInt(append(b, `},"total_tokens":`...), int64(u.TotalTokens), 10)
	return append(b, '}')
}

type responseUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

func newResponseUsage(u Usage) *responseUsage {
	r := &responseUsage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, TotalTokens: u.InputTokens + u.OutputTokens}
	r.InputTokensDetails.CachedTokens = u.CachedTokens
	r.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	return r
}

// Output items.

type outputMessage struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type functionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

type customToolCallItem struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status string `json:"status"`
	CallID string `json:"call_id"`
	Name   string `json:"name"`
	Input  string `json:"input"`
}

type reasoningItem struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Summary []any           `json:"summary"`
	Content []reasoningText `json:"content"`
	// EncryptedContent is svc's signature of the reasoning text: given back in a later request's
	// input, it shows that svc produced the reasoning, which then goes to the upstream again.
	EncryptedContent string `json:"encrypted_content,omitempty"`
}

type reasoningText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newOutputText(text string) outputText {
	return outputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: []any{}}
}

// itemID names an output item after its response and its place in the output, so that a stored
// response names its items the same way every time it is read.
func itemID(prefix, responseID string, index int) string {
	return prefix + "_" + strings.TrimPrefix(responseID, "resp_") + "_" + strconv.Itoa(index)
}

// toolItem is the output item of a tool call: a function_call, or a custom_tool_call for custom tools
// (whose input is the "input" argument of the function svc offered).
func (info *ResponsesInfo) toolItem(responseID string, index int, callID, name, args, status string) any {
	if info.custom[name] {
		var in struct {
			Input string `json:"input"`
		}
		if json.Unmarshal([]byte(args), &in) != nil {
			in.Input = args
		}
		return customToolCallItem{ID: itemID("ctc", responseID, index), Type: "custom_tool_call", Status: status, CallID: callID, Name: name, Input: in.Input}
	}
	return functionCallItem{ID: itemID("fc", responseID, index), Type: "function_call", Status: status, Arguments: args, CallID: callID, Name: name}
}

func (info *ResponsesInfo) reasoningItem(responseID string, index int, text string) reasoningItem {
	summary := []any{}
	if info.summary {
		summary = []any{reasoningText{Type: "summary_text", Text: text}}
	}
	return reasoningItem{ID: itemID("rs", responseID, index), Type: "reasoning", Summary: summary,
		Content: []reasoningText{{Type: "reasoning_text", Text: text}}, EncryptedContent: signThinking(info.secret, text)}
}

// response returns the response object with the request's settings; status and output to be set.
func (info *ResponsesInfo) response(id, model string, createdAt int64) *responseObject {
	e := &info.echo
	return &responseObject{ID: id, Object: "response", CreatedAt: createdAt, Status: "in_progress", Model: model,
		Output: []any{}, Instructions: e.instructions, MaxOutputTokens: e.maxOutputTokens, ParallelToolCalls: e.parallelToolCalls,
		PreviousResponseID: e.previousResponseID, Reasoning: e.reasoning, Store: e.store, Temperature: e.temperature,
		Text: e.text, ToolChoice: e.toolChoice, Tools: e.tools, TopP: e.topP, Truncation: "disabled", User: e.user,
		Metadata: e.metadata}
}

// finishStatus is a response's status and incomplete_details after the upstream's finish_reason.
func finishStatus(finish string) (string, *incompleteDetails) {
	switch finish {
	case "length":
		return "incomplete", &incompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		return "incomplete", &incompleteDetails{Reason: "content_filter"}
	}
	return "completed", nil
}

// ChatToResponse turns a chat.completion JSON answer into a Responses API response object named id
// and model, created at createdAt (Unix seconds). Output items come in the order reasoning (when the
// upstream reasoned), message (text), then one function_call per tool call. A length stop makes the
// response incomplete (incomplete_details.reason "max_output_tokens"). An error means the answer
// cannot be translated (the edge answers 502); its message is safe to show. Without upstream usage,
// usage is estimated from the sizes of the prompt and the answer.
func ChatToResponse(completionJSON []byte, id, model string, createdAt int64, info *ResponsesInfo) (responseJSON []byte, u Usage, err error) {
	if info == nil {
		info = &ResponsesInfo{}
	}
	a, err := readAnswer(completionJSON)
	if err != nil {
		return nil, Usage{}, err
	}
	r := info.response(id, model, createdAt)
	r.Status, r.IncompleteDetails = finishStatus(a.finish)
	itemStatus := "completed"
	if r.Status == "incomplete" {
		itemStatus = "incomplete"
	}
	size := len(a.reasoning)
	if a.reasoning != "" {
		r.Output = append(r.Output, info.reasoningItem(id, len(r.Output), a.reasoning))
	}
	if a.text != "" || (len(a.calls) == 0) {
		r.Output = append(r.Output, outputMessage{ID: itemID("msg", id, len(r.Output)), Type: "message", Status: itemStatus,
			Role: "assistant", Content: []outputText{newOutputText(a.text)}})
		size += len(a.text)
	}
	for _, c := range a.calls {
		callID := c.id
		if callID == "" {
			callID = "call_" + randomHex(12)
		}
		r.Output = append(r.Output, info.toolItem(id, len(r.Output), callID, c.name, argumentsText(c.args), itemStatus))
		size += len(c.name) + len(c.args)
	}
	if a.usage != nil {
		u = *a.usage
	} else {
		u = Usage{InputTokens: info.InputTokensEstimate(), OutputTokens: EstimateTokens(size)}
	}
	r.Usage = newResponseUsage(u)
	return r.appendJSON(make([]byte, 0, r.sizeHint())), u, nil
}

// argumentsText is a tool call's arguments as the Responses API gives them: the upstream's text, "{}"
// for none (servers send "" for functions without parameters; clients parse the arguments as JSON).
func argumentsText(args []byte) string {
	if strings.TrimSpace(string(args)) == "" {
		return "{}"
	}
	return string(args)
}
