package edge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/dataset"
)

// A mixed history of chat, Messages and Responses calls with tool calls and their results, made through
// the edge, is exported by the API as chat-jsonl lines that OpenAI's format (dataset.ValidateChatLine)
// takes, one per exportable run; the failed call is left out and counted in the trailers; minScore
// keeps the runs scored at least that.
func TestExportMixedHistory(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("export", base("sim-echo"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	anthropic := map[string]string{"Authorization": "Bearer " + key, "Anthropic-Version": "2023-06-01"}
	weather := map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "description": "the weather of a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}}}
	ok := func(r reply) reply {
		t.Helper()
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		return r
	}
	// chat: a tool call (streamed), then the conversation with its result
	ok(e.do("POST", "export", "/v1/chat/completions", key, chatBody("use get_weather", "tools", []any{weather}, "stream", true)))
	first := ok(e.do("POST", "export", "/v1/chat/completions", key, map[string]any{"tools": []any{weather}, "messages": []any{
		map[string]any{"role": "user", "content": "use get_weather"},
		map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Oslo"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "4 degrees"},
	}}))
	// Messages: a tool_use, then its tool_result
	tool := map[string]any{"name": "get_weather", "input_schema": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}
	ok(e.doHeaders("POST", "export", "/v1/messages", map[string]any{"model": "sim-echo", "max_tokens": 64, "tools": []any{tool},
		"messages": []any{map[string]any{"role": "user", "content": "use get_weather"}}}, anthropic))
	ok(e.doHeaders("POST", "export", "/v1/messages", map[string]any{"model": "sim-echo", "max_tokens": 64, "tools": []any{tool}, "stream": true,
		"messages": []any{
			map[string]any{"role": "user", "content": "use get_weather"},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": map[string]any{"city": "Oslo"}}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "content": "4 degrees"}}},
		}}, anthropic))
	// Responses: a function_call, then its output continuing the response
	fn := map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}}
	r := ok(e.do("POST", "export", "/v1/responses", key, map[string]any{"model": "sim-echo", "input": "use get_weather", "tools": []any{fn}}))
	resp := r.json(t)
	var callID string
	for _, item := range resp["output"].([]any) {
		if m := item.(map[string]any); m["type"] == "function_call" {
			callID = m["call_id"].(string)
		}
	}
	if callID == "" {
		t.Fatalf("no function_call: %s", r.body)
	}
	ok(e.do("POST", "export", "/v1/responses", key, map[string]any{"model": "sim-echo", "previous_response_id": resp["id"], "tools": []any{fn},
		"input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": "4 degrees"}}}))
	// a failed call: no answer to write
	if r := e.do("POST", "export", "/v1/chat/completions", key, map[string]any{"messages": "not a list"}); r.status != 400 {
		t.Fatalf("bad call: %d", r.status)
	}
	e.runs(d.ID, 7)

	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	lines, counts := export(t, api, d.ID, cloudapi.ExportOptions{})
	if len(lines) != 6 || counts.Written != 6 || counts.Skipped["failed"] != 1 || len(counts.Skipped) != 1 {
		t.Fatalf("%d lines, counts %+v; want 6 and failed=1", len(lines), counts)
	}
	tools := 0
	for i, l := range lines {
		if err := dataset.ValidateChatLine([]byte(l)); err != nil {
			t.Errorf("line %d: %v\n%s", i, err, l)
		}
		if strings.Contains(l, `"role":"tool"`) {
			tools++
		}
		if !strings.Contains(l, "get_weather") {
			t.Errorf("line %d lost its tools: %s", i, l)
		}
	}
	if tools != 3 {
		t.Errorf("%d lines hold a tool result, want 3 (one a surface)", tools)
	}

	// minScore: only the runs scored 1 or more.
	if r := e.do("POST", "export", "/v1/feedback", key, map[string]any{"id": first.json(t)["id"], "score": 1}); r.status != 200 {
		t.Fatal(r.status, string(r.body))
	}
	one := 1
	lines, counts = export(t, api, d.ID, cloudapi.ExportOptions{MinScore: &one})
	if len(lines) != 1 || counts.Written != 1 || !strings.Contains(lines[0], "4 degrees") {
		t.Fatalf("minScore 1: %d lines %+v", len(lines), counts)
	}
	// Bad parameters are 400s naming them, before any line.
	for _, o := range []cloudapi.ExportOptions{{Format: "csv"}, {Status: "some"}, {Arm: "left"}, {MinScore: new(int)}} {
		if o.MinScore != nil {
			*o.MinScore = 2
		}
		_, err := api.ExportRuns(ctx, d.ID, o)
		if ce, isAPI := err.(*cloudapi.Error); !isAPI || ce.Status != 400 {
			t.Errorf("%+v: %v, want a 400", o, err)
		}
	}
	if _, err := api.ExportRuns(ctx, "dep_unknown", cloudapi.ExportOptions{}); err == nil || err.(*cloudapi.Error).Status != 404 {
		t.Errorf("unknown deployment: %v", err)
	}
}

// export reads an export to its end, with its counts.
func export(t *testing.T, api *cloudapi.Client, deploymentID string, o cloudapi.ExportOptions) ([]string, cloudapi.ExportCounts) {
	t.Helper()
	x, err := api.ExportRuns(context.Background(), deploymentID, o)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	var lines []string
	sc := bufio.NewScanner(x)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	counts, err := x.Counts()
	if err != nil {
		t.Fatal(err)
	}
	return lines, counts
}

// An endpoint whose upstream serves the Responses API itself passes calls through, and a chain goes on
// by the upstream's response ids (previous_response_id names the upstream's id, which the run keeps as
// upstreamResponseId): its later turns are exported with their earlier turns, as a chain of svc's own ids
// is, plain and streamed, the function call and its output in place.
func TestExportPassedThroughResponsesChain(t *testing.T) {
	e := newEnv(t)
	d, key := e.deploy("export-pass", base("up-responses"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	fn := map[string]any{"type": "function", "name": "get_weather", "parameters": map[string]any{"type": "object",
		"properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []any{"city"}}}
	for _, stream := range []bool{false, true} {
		// The mock upstream calls the tool named in the last user message, and answers its output.
		body := map[string]any{"model": "up-responses", "input": "use get_weather", "tools": []any{fn}, "stream": stream}
		first := e.do("POST", "export-pass", "/v1/responses", key, body)
		done := responseOf(t, first, stream)
		var callID string
		for _, item := range done["output"].([]any) {
			if m := item.(map[string]any); m["type"] == "function_call" {
				callID = m["call_id"].(string)
			}
		}
		id, _ := done["id"].(string)
		if !strings.HasPrefix(id, "resp_mock") || callID == "" {
			t.Fatalf("stream %v: the upstream's response %q with call %q, want a passed-through function call: %s", stream, id, callID, first.body)
		}
		next := e.do("POST", "export-pass", "/v1/responses", key, map[string]any{"model": "up-responses", "previous_response_id": id, "tools": []any{fn},
			"stream": stream, "input": []any{map[string]any{"type": "function_call_output", "call_id": callID, "output": "4 degrees"}}})
		responseOf(t, next, stream)
	}
	e.runs(d.ID, 4)

	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	lines, counts := export(t, api, d.ID, cloudapi.ExportOptions{})
	if len(lines) != 4 || counts.Written != 4 || len(counts.Skipped) != 0 {
		t.Fatalf("%d lines, counts %+v; want the 4 turns written", len(lines), counts)
	}
	chained := 0
	for i, l := range lines {
		if err := dataset.ValidateChatLine([]byte(l)); err != nil {
			t.Errorf("line %d: %v\n%s", i, err, l)
		}
		// A later turn holds the earlier one: the user's question, the call, its result and the answer.
		if strings.Contains(l, `"role":"tool"`) {
			chained++
			for _, want := range []string{"use get_weather", `"tool_calls"`, "4 degrees", "tool result: 4 degrees"} {
				if !strings.Contains(l, want) {
					t.Errorf("line %d lacks %s: %s", i, want, l)
				}
			}
		}
	}
	if chained != 2 {
		t.Errorf("%d lines continue a chain, want 2 (plain and streamed)", chained)
	}
}

// responseOf is the response object of a Responses answer: the body, or a stream's response.completed.
func responseOf(t *testing.T, r reply, stream bool) map[string]any {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if !stream {
		return r.json(t)
	}
	for _, data := range sseData(r.body) {
		var ev struct {
			Type     string         `json:"type"`
			Response map[string]any `json:"response"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "response.completed" {
			return ev.Response
		}
	}
	t.Fatalf("no response.completed: %s", r.body)
	return nil
}

// Shadow pairs made through the edge, of every surface, become preference lines where feedback prefers
// one answer: the caller's score on the primary's answer (POST /v1/feedback) against a score on the
// canary's copy (the API); both runs were asked the same conversation, so none is a mismatch.
func TestExportShadowPairsAsPreferences(t *testing.T) {
	// The canary answers lorem ipsum, unlike the primary's echo, on every surface.
	e := newEnvWith(t, envOptions{models: `  - name: sim-lorem-all
    runtime: simulator
    supportsMessages: true
    simulator: {mode: lorem, loremTokens: 10, itlMs: 0}
`})
	d, key := e.deploy("prefer", base("sim-echo"), cloudapi.AuthFixedAPIKey, cloudapi.RetentionDays, 7)
	e.setCanary(d.ID, "sim-lorem-all", 10, edgemodel.CanaryShadow)
	anthropic := map[string]string{"Authorization": "Bearer " + key, "Anthropic-Version": "2023-06-01"}
	calls := []func() reply{
		func() reply { return e.do("POST", "prefer", "/v1/chat/completions", key, chatBody("echo me, chat")) },
		func() reply {
			return e.do("POST", "prefer", "/v1/chat/completions", key, chatBody("echo me, streamed", "stream", true))
		},
		func() reply {
			return e.doHeaders("POST", "prefer", "/v1/messages", map[string]any{"model": "sim-echo", "max_tokens": 64,
				"messages": []any{map[string]any{"role": "user", "content": "echo me, Messages"}}}, anthropic)
		},
		func() reply {
			return e.do("POST", "prefer", "/v1/responses", key, map[string]any{"model": "sim-echo", "input": "echo me, Responses"})
		},
		func() reply {
			return e.do("POST", "prefer", "/v1/chat/completions", key, chatBody("echo me, unscored"))
		},
	}
	for i, call := range calls {
		if r := call(); r.status != 200 {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	runs := e.armRuns(d.ID, 2*len(calls))
	if len(runs) != 2*len(calls) {
		t.Fatalf("%d runs, want %d (each call and its copy)", len(runs), 2*len(calls))
	}
	api := cloudapi.New(e.srv.BaseURL, e.token).WithProject(e.pr.OrgSlug, e.pr.Slug)
	ctx := context.Background()
	// The primary preferred on chat and Messages, the canary on the stream and Responses; the last unscored.
	canaryWins := map[string]bool{"echo me, streamed": true, "echo me, Responses": true}
	for _, r := range runs {
		if r.arm != edgemodel.ArmPrimary {
			continue
		}
		var question string
		for q := range map[string]bool{"echo me, chat": true, "echo me, streamed": true, "echo me, Messages": true, "echo me, Responses": true} {
			if strings.Contains(r.response, q) {
				question = q
			}
		}
		if question == "" {
			continue
		}
		score := 1
		if canaryWins[question] {
			score = -1
		}
		if res := e.do("POST", "prefer", "/v1/feedback", key, map[string]any{"id": r.id, "score": score}); res.status != 200 {
			t.Fatalf("feedback on %s: %d %s", r.id, res.status, res.body)
		}
		var copyID string
		for _, c := range runs {
			if c.shadowOf == r.id {
				copyID = c.id
			}
		}
		if _, err := api.SetRunFeedback(ctx, d.ID, copyID, cloudapi.SetRunFeedbackRequest{Score: -score}); err != nil {
			t.Fatalf("feedback on the copy %q of %s: %v", copyID, r.id, err)
		}
	}
	lines, counts := export(t, api, d.ID, cloudapi.ExportOptions{Format: cloudapi.ExportPreference})
	if len(lines) != 4 || counts.Written != 4 || counts.Skipped["unranked"] != 1 || len(counts.Skipped) != 1 {
		t.Fatalf("%d lines, counts %+v; want 4 pairs written and 1 unranked", len(lines), counts)
	}
	for i, l := range lines {
		if err := dataset.ValidatePreferenceLine([]byte(l)); err != nil {
			t.Errorf("line %d: %v\n%s", i, err, l)
		}
		var line struct {
			Input struct {
				Messages []struct{ Content string }
			}
			Preferred, NonPreferred []struct{ Content string }
		}
		json.Unmarshal([]byte(l), &line)
		var raw map[string]json.RawMessage
		json.Unmarshal([]byte(l), &raw)
		json.Unmarshal(raw["preferred_output"], &line.Preferred)
		json.Unmarshal(raw["non_preferred_output"], &line.NonPreferred)
		if len(line.Input.Messages) == 0 || len(line.Preferred) != 1 || len(line.NonPreferred) != 1 {
			t.Fatalf("line %d: %s", i, l)
		}
		question := line.Input.Messages[len(line.Input.Messages)-1].Content
		echo := line.Preferred[0].Content == question
		if other := line.NonPreferred[0].Content == question; echo == other || echo == canaryWins[question] {
			t.Errorf("line %d (%q): preferred %q over %q", i, question, line.Preferred[0].Content, line.NonPreferred[0].Content)
		}
	}
}
