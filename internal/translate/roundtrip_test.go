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
	chat, info, e := MessagesToChat([]byte(body))
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
