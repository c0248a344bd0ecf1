package mockupstream

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Responses API (POST /v1/responses, with Config.ServeResponses) and vLLM's POST /tokenize
// (with Config.ServeTokenize), minimal but in their exact wire formats.
//
// A Responses request is answered like a chat request (plan.go): the input's last user message (a
// string input, or the text of the last user message item) picks the tools to call among function
// tools; a last function_call_output is answered "tool result: <output>"; otherwise Config.Tokens
// words, cut at max_output_tokens (status "incomplete").

// responsesPlan reads a Responses request into the chat plan's terms.
func (s *Server) responsesPlan(req *Request, cfg Config) (*plan, error) {
	userText, lastOutput, output := "", false, ""
	switch in := req.Body["input"].(type) {
	case string:
		userText = in
	case []any:
		for _, it := range in {
			m, _ := it.(map[string]any)
			typ, _ := m["type"].(string)
			switch {
			case (typ == "" || typ == "message") && m["role"] == "user":
				userText, lastOutput = responsesText(m["content"]), false
			case typ == "function_call_output":
				lastOutput, output = true, responsesText(m["output"])
			case typ == "message" || typ == "":
				lastOutput = false
			}
		}
	}
	var tools []tool
	if list, ok := req.Body["tools"].([]any); ok {
		for _, t := range list {
			m, _ := t.(map[string]any)
			if m["type"] != "function" {
				continue
			}
			name, _ := m["name"].(string)
			params, _ := json.Marshal(m["parameters"])
			tools = append(tools, tool{name, params})
		}
	}
	// tool_choice in the chat plan's terms: a named function is {"type":"function","function":{"name"}}.
	body := map[string]any{"tool_choice": req.Body["tool_choice"], "parallel_tool_calls": req.Body["parallel_tool_calls"]}
	if tc, ok := req.Body["tool_choice"].(map[string]any); ok {
		body["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": tc["name"]}}
	}
	chosen, err := chooseTools(body, tools, userText, lastOutput)
	if err != nil {
		return nil, err
	}
	if len(chosen) > 0 {
		p := &plan{finish: "tool_calls"}
		for _, t := range chosen {
			c := toolCall{id: "call_" + strconv.FormatInt(s.callCount.Add(1), 10), name: t.name, arguments: arguments(t.params, userText)}
			p.calls = append(p.calls, c)
			p.tokens += 1 + len(fragments(c.arguments))
		}
		return p, nil
	}
	full := strings.Join(answer(cfg.Tokens), "")
	if lastOutput {
		full = "tool result: " + output
	}
	toks := tokenize(full)
	p := &plan{finish: "stop"}
	if v, ok := req.Body["max_output_tokens"].(float64); ok && int(v) > 0 && int(v) < len(toks) {
		toks, p.finish = toks[:int(v)], "length"
	}
	p.text, p.tokens = toks, len(toks)
	return p, nil
}

// responsesText is the text of a message's content or a function call's output: a string, or its
// text parts joined.
func responsesText(c any) string {
	switch c := c.(type) {
	case string:
		return c
	case []any:
		var texts []string
		for _, p := range c {
			if pm, ok := p.(map[string]any); ok {
				if t, ok := pm["text"].(string); ok {
					texts = append(texts, t)
				}
			}
		}
		return strings.Join(texts, "\n")
	}
	return ""
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	req, cfg, ok := s.begin(w, r)
	if req != nil {
		defer close(req.Done)
	}
	if !ok {
		return
	}
	if !cfg.ServeResponses {
		vllmError(w, http.StatusNotFound, "NotFoundError", "Not Found")
		return
	}
	p, err := s.responsesPlan(req, cfg)
	if err != nil {
		vllmError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	model, _ := req.Body["model"].(string)
	n := s.respCount.Add(1)
	id := "resp_mock" + strconv.FormatInt(n, 10)
	created := time.Now().Unix()
	in := 0
	if b, err := json.Marshal(req.Body["input"]); err == nil {
		in = len(strings.Fields(string(b)))
	}
	status := "completed"
	var incomplete any
	if p.finish == "length" {
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	response := func(status string, output []any, usage any) map[string]any {
		r := map[string]any{"id": id, "object": "response", "created_at": created, "status": status, "background": false,
			"error": nil, "incomplete_details": nil, "instructions": req.Body["instructions"], "max_output_tokens": req.Body["max_output_tokens"],
			"model": model, "output": output, "parallel_tool_calls": true, "previous_response_id": nil,
			"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": true, "temperature": 1.0,
			"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto", "tools": []any{},
			"top_p": 1.0, "truncation": "disabled", "usage": usage, "user": nil, "metadata": map[string]any{}}
		if status == "incomplete" {
			r["incomplete_details"] = incomplete
		}
		return r
	}
	usage := map[string]any{"input_tokens": in, "input_tokens_details": map[string]int{"cached_tokens": 0},
		"output_tokens": p.tokens, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": in + p.tokens}
	if cfg.NoUsage {
		usage = nil
	}
	var items []map[string]any
	if len(p.calls) > 0 {
		for i, c := range p.calls {
			items = append(items, map[string]any{"id": fmt.Sprintf("fc_mock%d_%d", n, i), "type": "function_call", "status": "completed",
				"arguments": c.arguments, "call_id": c.id, "name": c.name})
		}
	} else {
		items = append(items, map[string]any{"id": fmt.Sprintf("msg_mock%d", n), "type": "message", "status": status, "role": "assistant",
			"content": []any{outputTextPart(strings.Join(p.text, ""))}})
	}
	output := make([]any, len(items))
	for i, it := range items {
		output[i] = it
	}

	if stream, _ := req.Body["stream"].(bool); !stream {
		if !sleep(r, cfg.TTFT+time.Duration(p.tokens)*cfg.ITL) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(response(status, output, usage))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	seq := 0
	send := func(ev map[string]any) {
		ev["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], b)
		flusher.Flush()
	}
	if !sleep(r, cfg.TTFT) {
		return
	}
	send(map[string]any{"type": "response.created", "response": response("in_progress", []any{}, nil)})
	send(map[string]any{"type": "response.in_progress", "response": response("in_progress", []any{}, nil)})
	delta := 0
	step := func() bool {
		delta++
		if cfg.CutAfter > 0 && delta > cfg.CutAfter {
			panic(http.ErrAbortHandler)
		}
		return delta == 1 || sleep(r, cfg.ITL)
	}
	for i, it := range items {
		if it["type"] == "function_call" {
			added := map[string]any{"id": it["id"], "type": "function_call", "status": "in_progress", "arguments": "", "call_id": it["call_id"], "name": it["name"]}
			send(map[string]any{"type": "response.output_item.added", "output_index": i, "item": added})
			for _, f := range fragments(it["arguments"].(string)) {
				if !step() {
					return
				}
				send(map[string]any{"type": "response.function_call_arguments.delta", "item_id": it["id"], "output_index": i, "delta": f})
			}
			send(map[string]any{"type": "response.function_call_arguments.done", "item_id": it["id"], "output_index": i,
				"arguments": it["arguments"], "name": it["name"]})
			send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": it})
			continue
		}
		send(map[string]any{"type": "response.output_item.added", "output_index": i,
			"item": map[string]any{"id": it["id"], "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
		send(map[string]any{"type": "response.content_part.added", "item_id": it["id"], "output_index": i, "content_index": 0, "part": outputTextPart("")})
		for _, t := range p.text {
			if !step() {
				return
			}
			send(map[string]any{"type": "response.output_text.delta", "item_id": it["id"], "output_index": i, "content_index": 0, "delta": t, "logprobs": []any{}})
		}
		text := strings.Join(p.text, "")
		send(map[string]any{"type": "response.output_text.done", "item_id": it["id"], "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}})
		send(map[string]any{"type": "response.content_part.done", "item_id": it["id"], "output_index": i, "content_index": 0, "part": outputTextPart(text)})
		send(map[string]any{"type": "response.output_item.done", "output_index": i, "item": it})
	}
	end := "response.completed"
	if status == "incomplete" {
		end = "response.incomplete"
	}
	send(map[string]any{"type": end, "response": response(status, output, usage)})
	sleep(r, cfg.EndDelay)
}

func outputTextPart(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// tokenize answers vLLM's /tokenize: the prompt (or the chat messages' and tools' text) a word a
// token, each token id a hash of its word.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	req, cfg, ok := s.begin(w, r)
	if req != nil {
		defer close(req.Done)
	}
	if !ok {
		return
	}
	if !cfg.ServeTokenize {
		vllmError(w, http.StatusNotFound, "NotFoundError", "Not Found")
		return
	}
	var text string
	switch {
	case req.Body["prompt"] != nil:
		text, _ = req.Body["prompt"].(string)
	case req.Body["messages"] != nil:
		msgs, _ := req.Body["messages"].([]any)
		for _, m := range msgs {
			mm, _ := m.(map[string]any)
			text += " " + contentText(mm["content"])
		}
		if tools, ok := req.Body["tools"]; ok {
			b, _ := json.Marshal(tools)
			text += " " + string(b)
		}
	default:
		vllmError(w, http.StatusBadRequest, "BadRequestError", "either prompt or messages is required")
		return
	}
	tokens := []int{}
	for _, word := range strings.Fields(text) {
		h := fnv.New32a()
		h.Write([]byte(word))
		tokens = append(tokens, int(h.Sum32()%50000))
	}
	maxLen := cfg.MaxModelLen
	if maxLen <= 0 {
		maxLen = 8192
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"count": len(tokens), "max_model_len": maxLen, "tokens": tokens, "token_strs": nil})
}

// textCompletion answers /v1/completions: Config.Tokens words (cut at max_tokens), plain or streamed
// (a chunk a word, the usage chunk when asked, [DONE]).
func (s *Server) textCompletion(w http.ResponseWriter, r *http.Request) {
	req, cfg, ok := s.begin(w, r)
	if req != nil {
		defer close(req.Done)
	}
	if !ok {
		return
	}
	model, _ := req.Body["model"].(string)
	toks := answer(maxTokens(req.Body, cfg.Tokens))
	finish := "stop"
	if len(toks) < cfg.Tokens {
		finish = "length"
	}
	prompt, _ := req.Body["prompt"].(string)
	in := len(strings.Fields(prompt))
	usage := map[string]int{"prompt_tokens": in, "completion_tokens": len(toks), "total_tokens": in + len(toks)}
	id := "cmpl-mock" + strconv.FormatInt(s.idCount.Add(1), 10)
	if stream, _ := req.Body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "text_completion", "created": time.Now().Unix(), "model": model,
			"choices": []any{map[string]any{"index": 0, "text": strings.Join(toks, ""), "logprobs": nil, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	for i, t := range toks {
		var fr any
		if i == len(toks)-1 {
			fr = finish
		}
		send(map[string]any{"id": id, "object": "text_completion", "model": model, "choices": []any{map[string]any{"index": 0, "text": t, "logprobs": nil, "finish_reason": fr}}})
	}
	if so, ok := req.Body["stream_options"].(map[string]any); ok && so["include_usage"] == true {
		send(map[string]any{"id": id, "object": "text_completion", "model": model, "choices": []any{}, "usage": usage})
	}
	io.WriteString(w, "data: [DONE]\n\n")
}
