package dataset

import (
	"encoding/json"
	"strings"

	"github.com/svcdev/svc/internal/conv"
)

// Replay is a stored run read for a replay eval (docs/API.md, "Evals"): the request as the model saw
// it, in chat form (a Messages or Responses run translated as the edge translated it, a Responses
// chain and its item references in place), and its recorded answer in chat form.
type Replay struct {
	// Body is the chat completions request to send again: the run's members and sampling parameters,
	// temperature 0 when it set none, not streamed.
	Body []byte
	// Conversation is the request's turns and function tools.
	Conversation conv.Conversation
	// ResponseFormat is the request's response_format in chat form, nil when it asked none.
	ResponseFormat json.RawMessage
	// Answer is what the run answered.
	Answer Answer
}

// Answer is one side's answer in chat form: its text, finish reason ("stop", "length", "tool_calls",
// …) and tool calls. It has evalscore.Answer's fields, so that one converts to the other.
type Answer struct {
	Text         string
	FinishReason string
	ToolCalls    []conv.ToolCall
}

// ReplayOf reads a stored run for a replay: what Check and the export's conversion refuse, it refuses
// alike (a *Refused).
func ReplayOf(r Run, opt Options) (*Replay, error) {
	opt.Reasoning = false
	c, err := convert(r, opt)
	if err != nil {
		return nil, err
	}
	members := make(map[string]json.RawMessage, len(c.request)+1)
	for k, v := range c.request {
		members[k] = v
	}
	delete(members, "stream")
	delete(members, "stream_options")
	if t, ok := members["temperature"]; !ok || string(t) == "null" {
		members["temperature"] = json.RawMessage("0")
	}
	body, err := json.Marshal(members)
	if err != nil {
		return nil, refuse(ReasonUnparseable, "request: %v", err)
	}
	rf := members["response_format"]
	if string(rf) == "null" {
		rf = nil
	}
	return &Replay{Body: body, Conversation: c.in, ResponseFormat: rf,
		Answer: Answer{Text: textOf(c.answer.Content), FinishReason: finishOf(Detect(r.Response), r.Response, len(c.answer.ToolCalls) > 0),
			ToolCalls: convCalls(c.answer.ToolCalls)}}, nil
}

// ChatAnswer reads a chat completion's first choice as an Answer (the candidate's answer to a replay).
func ChatAnswer(completion []byte) (Answer, error) {
	c, err := fromChatAnswer(completion)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Text: textOf(c.Content), FinishReason: finishOf(SurfaceChat, completion, len(c.ToolCalls) > 0), ToolCalls: convCalls(c.ToolCalls)}, nil
}

// fromChatAnswer is a chat completion's first choice's message, as a line writes it.
func fromChatAnswer(completion []byte) (message, error) {
	var resp struct {
		Choices []struct {
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(completion, &resp); err != nil {
		return message{}, refuse(ReasonUnparseable, "answer: %v", err)
	}
	if len(resp.Choices) == 0 {
		return message{}, refuse(ReasonEmpty, "the answer has no choices")
	}
	m, err := conv.ReadChatMessage(resp.Choices[0].Message)
	if err != nil {
		return message{}, readRefusal("answer", err)
	}
	m.Role = "assistant"
	a, rerr := lineMessage(m)
	if rerr != nil {
		return message{}, rerr
	}
	return a, nil
}

// finishOf is an answer's finish reason in chat's words: a Messages stop_reason end_turn or
// stop_sequence "stop", tool_use "tool_calls", max_tokens "length"; a Responses answer completed
// "stop" ("tool_calls" when it calls tools), incomplete for max_output_tokens "length".
func finishOf(s Surface, response []byte, calls bool) string {
	var a struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		StopReason        string `json:"stop_reason"`
		Status            string `json:"status"`
		IncompleteDetails struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
	}
	_ = json.Unmarshal(response, &a)
	switch s {
	case SurfaceChat:
		if len(a.Choices) > 0 {
			return a.Choices[0].FinishReason
		}
	case SurfaceMessages:
		switch a.StopReason {
		case "end_turn", "stop_sequence":
			return "stop"
		case "tool_use":
			return "tool_calls"
		case "max_tokens":
			return "length"
		}
		return a.StopReason
	case SurfaceResponses:
		switch {
		case a.Status == "incomplete" && a.IncompleteDetails.Reason == "max_output_tokens":
			return "length"
		case a.Status == "completed" && calls:
			return "tool_calls"
		case a.Status == "completed":
			return "stop"
		}
		return a.Status
	}
	return ""
}

// textOf is an answer's text: its string, or its text parts joined by newlines (conv's rule).
func textOf(content any) string {
	switch v := content.(type) {
	case string:
		return v
	case []part:
		var texts []string
		for _, p := range v {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

func convCalls(calls []toolCall) []conv.ToolCall {
	if len(calls) == 0 {
		return nil
	}
	out := make([]conv.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = conv.ToolCall{ID: c.ID, Type: c.Type, Function: conv.Function{Name: c.Function.Name, Arguments: c.Function.Arguments}}
	}
	return out
}
