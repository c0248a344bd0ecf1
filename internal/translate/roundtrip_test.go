package translate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/mockupstream"
)

// These tests send translated requests to the mock vLLM upstream and translate its answers back, as
// the edge does, to show that the two directions fit a real chat completions wire.

func upstream(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(mockupstream.New(mockupstream.Config{Tokens: 6}, false))
	t.Cleanup(srv.Close)
	return srv.URL
}

// call translates body, posts it to the upstream and returns the Anthropic message (assembled from
// the events when streaming).
func call(t *testing.T, url, body string) map[string]any {
	t.Helper()
	chat, info, e := messagesJSON([]byte(body))
	if e != nil {
		t.Fatal(e)
	}
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(chat))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []byte
	if !info.Stream {
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		if out, _, err = ChatToMessage(buf.Bytes(), "served", info); err != nil {
			t.Fatal(err)
		}
	} else {
		s := NewStream("served", info, info.InputTokensEstimate())
		var events []Event
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			ev, err := s.Chunk([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, ev...)
		}
		ev, err := s.Finish()
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := json.Marshal(accumulate(t, append(events, ev...)))
		if !jsonEqual(t, msg, s.Message()) {
			t.Errorf("Message() %s differs from the streamed %s", s.Message(), msg)
		}
		out = msg
	}
	var m map[string]any
	json.Unmarshal(out, &m)
	return m
}

func TestRoundTripToolUse(t *testing.T) {
	url := upstream(t)
	for _, stream := range []string{"false", "true"} {
		t.Run("stream="+stream, func(t *testing.T) {
			m := call(t, url, `{"max_tokens":100,"stream":`+stream+`,
				"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
				"messages":[{"role":"user","content":"get_weather please"}]}`)
			content := m["content"].([]any)
			if len(content) != 1 || m["stop_reason"] != "tool_use" {
				t.Fatalf("message %v", m)
			}
			tu := content[0].(map[string]any)
			input, _ := json.Marshal(tu["input"])
			if tu["type"] != "tool_use" || tu["name"] != "get_weather" || string(input) != `{"city":"get_weather please"}` {
				t.Errorf("block %v", tu)
			}
		})
	}
}

func TestRoundTripToolResult(t *testing.T) {
	url := upstream(t)
	m := call(t, url, `{"max_tokens":100,"stream":true,
		"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],
		"messages":[{"role":"user","content":"get_weather please"},
		 {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]},
		 {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"18C"}]}]}]}`)
	content := m["content"].([]any)
	if len(content) != 1 || content[0].(map[string]any)["text"] != "tool result: 18C" || m["stop_reason"] != "end_turn" {
		t.Errorf("message %v", m)
	}
}

func TestRoundTripImageAndStopSequence(t *testing.T) {
	url := upstream(t)
	m := call(t, url, `{"max_tokens":100,"stop_sequences":["brown"],"messages":[{"role":"user","content":[
		{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"what is it?"}]}]}`)
	content := m["content"].([]any)
	if len(content) != 1 || content[0].(map[string]any)["text"] != "[1 image(s)] The quick " ||
		m["stop_reason"] != "stop_sequence" || m["stop_sequence"] != "brown" {
		t.Errorf("message %v", m)
	}
}

func upstreamWith(t *testing.T, cfg mockupstream.Config) (*mockupstream.Server, string) {
	t.Helper()
	m := mockupstream.New(cfg, true)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv.URL
}

// A reasoning upstream (vLLM with a reasoning parser) through the Messages translation: its reasoning
// comes back as a signed thinking block, which, given back in the history, reaches the upstream as
// the assistant's reasoning.
func TestRoundTripThinking(t *testing.T) {
	for _, field := range []string{"reasoning_content", "reasoning"} {
		m, url := upstreamWith(t, mockupstream.Config{Tokens: 3, Reasoning: field})
		for _, stream := range []string{"false", "true"} {
			msg := call(t, url, `{"max_tokens":100,"stream":`+stream+`,"thinking":{"type":"adaptive"},"messages":[{"role":"user","content":"why is the sky blue"}]}`)
			content := msg["content"].([]any)
			if len(content) != 2 {
				t.Fatalf("%s stream=%s: content %v", field, stream, content)
			}
			th := content[0].(map[string]any)
			if th["type"] != "thinking" || !strings.Contains(th["thinking"].(string), "why is the sky blue") || content[1].(map[string]any)["text"] != "The quick brown" {
				t.Fatalf("%s stream=%s: content %v", field, stream, content)
			}
			history, _ := json.Marshal(map[string]any{"max_tokens": 100, "messages": []any{
				map[string]any{"role": "user", "content": "why is the sky blue"},
				map[string]any{"role": "assistant", "content": content},
				map[string]any{"role": "user", "content": "and at night?"}}})
			call(t, url, string(history))
			sent := m.LastRequest().Body["messages"].([]any)[1].(map[string]any)
			if sent["reasoning_content"] != th["thinking"] {
				t.Errorf("%s stream=%s: the upstream got the assistant turn %v", field, stream, sent)
			}
		}
	}
}

// respond translates a Responses request, posts it to the upstream and returns the response object
// (assembled from the events when streaming, checked against the stream's own Response()).
func respond(t *testing.T, url, body string) map[string]any {
	t.Helper()
	chat, info, e := responsesJSON([]byte(body), Options{})
	if e != nil {
		t.Fatal(e)
	}
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(chat))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []byte
	if !info.Stream {
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		if out, _, err = ChatToResponse(buf.Bytes(), "resp_rt", "served", 1, info); err != nil {
			t.Fatal(err)
		}
	} else {
		s := NewResponsesStream("resp_rt", "served", 1, info, info.InputTokensEstimate())
		var events []Event
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			ev, err := s.Chunk([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			events = append(events, ev...)
		}
		ev, err := s.Finish()
		if err != nil {
			t.Fatal(err)
		}
		_, final := accumulateResponse(t, append(events, ev...))
		out, _ = json.Marshal(final)
		if !jsonEqual(t, out, s.Response()) {
			t.Errorf("Response() %s differs from the streamed %s", s.Response(), out)
		}
	}
	var m map[string]any
	json.Unmarshal(out, &m)
	return m
}

// A function-calling turn and the turn after it, through the Responses translation, plain and
// streamed, the second continuing the first with WithPrevious as the edge does for
// previous_response_id.
func TestRoundTripResponses(t *testing.T) {
	_, url := upstreamWith(t, mockupstream.Config{Tokens: 4, Reasoning: "reasoning_content"})
	for _, stream := range []string{"false", "true"} {
		first := `{"model":"m","stream":` + stream + `,"input":"get_weather for Paris",
			"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}]}`
		r := respond(t, url, first)
		out := r["output"].([]any)
		if r["status"] != "completed" || len(out) != 2 || out[0].(map[string]any)["type"] != "reasoning" {
			t.Fatalf("stream=%s: response %v", stream, r)
		}
		fc := out[1].(map[string]any)
		if fc["type"] != "function_call" || fc["name"] != "get_weather" || fc["arguments"] != `{"city":"get_weather for Paris"}` {
			t.Fatalf("stream=%s: call %v", stream, fc)
		}
		stored, _ := json.Marshal(r)
		second := `{"model":"m","stream":` + stream + `,"previous_response_id":"resp_rt","input":[{"type":"function_call_output","call_id":"` + fc["call_id"].(string) + `","output":"18 C"}]}`
		next, e := WithPrevious([]byte(second), []Turn{{Request: []byte(first), Response: stored}})
		if e != nil {
			t.Fatal(e)
		}
		r = respond(t, url, string(next))
		out = r["output"].([]any)
		last := out[len(out)-1].(map[string]any)
		if r["previous_response_id"] != "resp_rt" || last["type"] != "message" || last["content"].([]any)[0].(map[string]any)["text"] != "tool result: 18 C" {
			t.Errorf("stream=%s: second response %v", stream, r)
		}
		u := r["usage"].(map[string]any)
		if u["input_tokens"].(float64) == 0 || u["output_tokens"].(float64) == 0 {
			t.Errorf("usage %v", u)
		}
	}
}
