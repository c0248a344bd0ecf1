package inference

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// messagesSSE renders Anthropic stream events as an upstream sends them.
func messagesSSE(events ...string) string {
	var b strings.Builder
	for _, ev := range events {
		var d struct{ Type string }
		json.Unmarshal([]byte(ev), &d)
		b.WriteString("event: " + d.Type + "\ndata: " + ev + "\n\n")
	}
	return b.String()
}

var nativeStream = messagesSSE(
	`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"up-m","content":[],"stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}`,
	`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
	`{"type":"ping"}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
	`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo \"you\""}}`,
	`{"type":"content_block_stop","index":0}`,
	`{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`,
	`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Lima\"}"}}`,
	`{"type":"content_block_stop","index":1}`,
	`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":7}}`,
	`{"type":"message_stop"}`,
)

// A passed-through Messages stream comes out as chunks that name their events, with the served model
// in message_start, the usage of message_start and message_delta, a delta counted per
// content_block_delta, the stop reason, and message_stop as the last one.
func TestMessagesStream(t *testing.T) {
	s := surfaceStream(SurfaceMessages, nativeStream, "served")
	var names []string
	var usage Usage
	deltas, last, finish := 0, false, ""
	answer := NewAnswer(SurfaceMessages, "served")
	for {
		ch, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if last {
			t.Fatal("a chunk after the last one")
		}
		names = append(names, string(ch.Event))
		var d struct{ Type string }
		if json.Unmarshal(ch.JSON, &d) != nil || d.Type != string(ch.Event) {
			t.Errorf("event %s carries %s", ch.Event, ch.JSON)
		}
		if d.Type == "message_start" && (!strings.Contains(string(ch.JSON), `"model":"served"`) || strings.Contains(string(ch.JSON), "up-m")) {
			t.Errorf("message_start relayed as %s, want the served model", ch.JSON)
		}
		if ch.Usage != nil {
			if ch.Usage.PromptTokens > 0 {
				usage.PromptTokens = ch.Usage.PromptTokens
			}
			if ch.Usage.CompletionTokens > 0 {
				usage.CompletionTokens = ch.Usage.CompletionTokens
			}
		}
		deltas += ch.Delivered()
		if f := ch.FinishReason(); f != "" {
			finish = f
		}
		last = ch.Last
		answer.Add(ch)
	}
	if !last || len(names) != 12 || names[0] != "message_start" || names[11] != "message_stop" {
		t.Errorf("events %v (last %v)", names, last)
	}
	if usage != (Usage{PromptTokens: 12, CompletionTokens: 7}) || deltas != 4 || finish != "tool_use" {
		t.Errorf("read usage %+v, deltas %d, finish %q", usage, deltas, finish)
	}
	if !s.ended {
		t.Error("the stream did not note its last event (its connection would not be drained for reuse)")
	}

	// The run's answer: the message a client that did not stream would have received.
	var msg struct {
		Model      string
		Role       string
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type, Text, Name string
			Input            map[string]any
		}
		Usage struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		}
	}
	b := answer.JSON(Usage{PromptTokens: 12, CompletionTokens: 7}, nil)
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if msg.Model != "served" || msg.Role != "assistant" || msg.StopReason != "tool_use" || len(msg.Content) != 2 ||
		msg.Content[0].Text != `Hello "you"` || msg.Content[1].Name != "get_weather" || msg.Content[1].Input["city"] != "Lima" ||
		msg.Usage.InputTokens != 12 || msg.Usage.OutputTokens != 7 {
		t.Errorf("assembled %s", b)
	}
}

// An error event ends the stream with the upstream's error, its Anthropic type kept; a stream that stops
// before message_stop ends with a 502 that says so.
func TestMessagesStreamFailures(t *testing.T) {
	s := surfaceStream(SurfaceMessages, messagesSSE(
		`{"type":"message_start","message":{"model":"up-m","usage":{"input_tokens":3}}}`,
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), "served")
	if ch, err := s.Next(); err != nil || string(ch.Event) != "message_start" {
		t.Fatalf("first event: %v", err)
	}
	_, err := s.Next()
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusBadGateway || e.AnthropicType != "overloaded_error" || e.Message != "Overloaded" {
		t.Errorf("error event: %#v", err)
	}
	if _, err := s.Next(); err != io.EOF {
		t.Errorf("after the error: %v", err)
	}

	s = surfaceStream(SurfaceMessages, messagesSSE(`{"type":"message_start","message":{"model":"up-m"}}`), "served")
	s.Next()
	if _, err := s.Next(); !errors.As(err, &e) || !strings.Contains(e.Message, "ended the stream early") {
		t.Errorf("cut stream: %v", err)
	}

	// An event that is not one of the API's (no type) is not relayed.
	s = surfaceStream(SurfaceMessages, "data: {\"x\":1}\n\n", "served")
	if _, err := s.Next(); !errors.As(err, &e) || e.Status != http.StatusBadGateway {
		t.Errorf("event without a type: %v", err)
	}
}

// message_start without a model gets the served one.
func TestRenameMessageAddsModel(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"message_start","message":{}}`:             `{"type":"message_start","message":{"model":"served"}}`,
		`{"type":"message_start","message":{"id":"m"}}`:     `{"type":"message_start","message":{"model":"served","id":"m"}}`,
		`{"message":{"model":null},"type":"message_start"}`: `{"message":{"model":"served"},"type":"message_start"}`,
	} {
		s := surfaceStream(SurfaceMessages, "data: "+in+"\n\n", "served")
		ch, err := s.Next()
		if err != nil || string(ch.JSON) != want {
			t.Errorf("%s: got %s (%v), want %s", in, ch.JSON, err, want)
		}
	}
}

// A non-streamed Messages answer is read in one pass: model renamed, usage, stop reason and text.
func TestReadMessage(t *testing.T) {
	o := &openAI{cfg: ModelConfig{Name: "m"}}
	c, err := o.readMessage([]byte(`{"id":"msg_1","type":"message","model":"up-m","content":[{"type":"text","text":"Hi "},{"type":"tool_use","id":"t","name":"f","input":{"text":"no"}},{"type":"text","text":"there"}],"stop_reason":"end_turn","usage":{"input_tokens":4,"output_tokens":2}}`), []byte(`"served"`), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c.JSON), `"model":"served"`) || c.Content != "Hi there" || c.FinishReason != "end_turn" ||
		c.Usage != (Usage{PromptTokens: 4, CompletionTokens: 2, TotalTokens: 6}) {
		t.Errorf("read %+v from %s", c, c.JSON)
	}
	// Malformed usage is not trusted: the edge counts the call itself.
	c, _ = o.readMessage([]byte(`{"model":"up-m","content":[],"usage":{"input_tokens":"4","output_tokens":2}}`), []byte(`"served"`), "")
	if c.Usage != (Usage{}) {
		t.Errorf("malformed usage read as %+v", c.Usage)
	}
	if _, err := o.readMessage([]byte(`{"model":`), []byte(`"served"`), ""); err == nil {
		t.Error("invalid JSON answered as a message")
	}
}

// The one mapper of upstream errors reads each envelope, keeps Anthropic's type, and turns a refusal of
// svc's credentials into a 502 that blames no one's key.
func TestUpstreamError(t *testing.T) {
	o := &openAI{cfg: ModelConfig{Name: "up"}}
	h := http.Header{"Retry-After": {"9"}, "Request-Id": {"req_1"}}
	cases := []struct {
		status int
		body   string
		want   Error
	}{
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`,
			Error{Status: 429, Type: "rate_limit_error", Code: CodeUpstreamError, Message: "slow down", AnthropicType: "rate_limit_error", RetryAfter: "9", UpstreamRequestID: "req_1"}},
		{400, `{"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":"x"}}`,
			Error{Status: 400, Type: "invalid_request_error", Code: "x", Param: "messages", Message: "bad", RetryAfter: "9", UpstreamRequestID: "req_1"}},
		{400, `{"object":"error","message":"too long","type":"BadRequestError"}`,
			Error{Status: 400, Type: "invalid_request_error", Code: CodeUpstreamError, Message: "too long", RetryAfter: "9", UpstreamRequestID: "req_1"}},
		{503, `upstream down`,
			Error{Status: 503, Type: "api_error", Code: CodeUpstreamError, Message: "upstream answered 503: upstream down", RetryAfter: "9", UpstreamRequestID: "req_1"}},
	}
	for _, c := range cases {
		if got := o.upstreamError(c.status, h, []byte(c.body)); *got != c.want {
			t.Errorf("%d %s:\n got %+v\nwant %+v", c.status, c.body, *got, c.want)
		}
	}
	e := o.upstreamError(401, h, []byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
	if e.Status != 502 || e.Code != CodeUpstreamAuth || e.AnthropicType != "" || !strings.Contains(e.Message, `"up"`) {
		t.Errorf("refused credentials: %+v", e)
	}
}
