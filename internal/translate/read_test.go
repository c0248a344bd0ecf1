package translate

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var updateMutations = flag.Bool("update-mutations", false, "write testdata/read/mutations.golden from this translation")

// TestMutatedRequests holds the readers of Messages entries and blocks and of Responses items and parts
// to what they answered before they were rewritten on jsonx's cursor (their outcomes written to
// testdata/read/mutations.golden by the map-per-object readers): every value under messages, system and
// input of a few requests replaced by each kind of JSON value, every object given a stray member, a
// hint, or one member fewer, every array shortened, lengthened and reversed. Each outcome (the error's
// param and message, or a digest of the conversation, its members and the names ignored) is listed
// the first time it is met.
func TestMutatedRequests(t *testing.T) {
	cases := mutations(t)
	seen := map[string]bool{}
	var lines []string
	for _, c := range cases {
		out := c.outcome()
		if seen[out] {
			continue
		}
		seen[out] = true
		lines = append(lines, c.name+"\t"+out)
	}
	golden := "testdata/read/mutations.golden"
	if *updateMutations {
		if err := os.WriteFile(golden, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]mutation{}
	for _, c := range cases {
		byName[c.name] = c
	}
	want := strings.Split(strings.TrimSpace(string(raw)), "\n")
	for _, line := range want {
		name, out, _ := strings.Cut(line, "\t")
		c, ok := byName[name]
		if !ok {
			t.Errorf("%s: no such mutation", name)
			continue
		}
		if got := c.outcome(); got != out {
			t.Errorf("%s:\n got %s\nwant %s", name, got, out)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("%d outcomes, %d in %s", len(lines), len(want), golden)
	}
	if len(cases) < 2000 || len(want) < 400 {
		t.Errorf("%d mutations, %d outcomes: the walk lost its reach", len(cases), len(want))
	}
}

type mutation struct {
	name      string
	responses bool
	body      []byte
}

func (c mutation) outcome() string {
	var (
		chat    *Chat
		ignored []string
		chars   int
		e       *Error
	)
	if c.responses {
		var info *ResponsesInfo
		if chat, info, e = ResponsesToChat(c.body, Options{}); e == nil {
			ignored, chars = info.Ignored, info.PromptChars
		}
	} else {
		var info *RequestInfo
		if chat, info, e = MessagesToChatWith(c.body, Options{}); e == nil {
			ignored, chars = info.Ignored, info.PromptChars
		}
	}
	if e != nil {
		return fmt.Sprintf("%q %q", e.Param, e.Message)
	}
	members, _ := json.Marshal(chat.Members)
	conversation, _ := json.Marshal(chat.Conversation)
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\n%s\n%q %d", members, conversation, ignored, chars))
	return fmt.Sprintf("ok %x", sum[:8])
}

// mutations are the requests of TestMutatedRequests, named by file, path and change.
func mutations(t *testing.T) []mutation {
	var out []mutation
	for _, s := range []struct {
		responses bool
		glob      string
		roots     []string
	}{
		{false, "testdata/request/*.messages.json", []string{"messages", "system"}},
		{true, "testdata/responses/request/*.request.json", []string{"input"}},
	} {
		files, _ := filepath.Glob(s.glob)
		for _, file := range files {
			if !mutated.MatchString(filepath.Base(file)) {
				continue
			}
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			for _, root := range s.roots {
				if _, ok := body[root]; !ok {
					continue
				}
				eachMutation(body, []any{root}, func(path []any, change string, b map[string]any) {
					enc, _ := json.Marshal(b)
					out = append(out, mutation{name: fmt.Sprintf("%s %v %s", filepath.Base(file), path, change), responses: s.responses, body: enc})
				})
			}
		}
	}
	return out
}

// mutated are the requests mutated: small ones that hold every kind of entry, block, item and part.
var mutated = regexp.MustCompile(`^(images|system_blocks|system_entries|documents|tool_history|thinking_history|prefill|text|roles|function_calls|custom_and_hosted_tools)\.`)

// eachMutation calls fn with each change of the value at path and below it, on a copy of body.
func eachMutation(body map[string]any, path []any, fn func(path []any, change string, b map[string]any)) {
	node := at(body, path)
	for _, v := range []any{1, "x", nil, []any{}, map[string]any{}, true} {
		b := clone(body)
		set(b, path, v)
		fn(path, fmt.Sprintf("= %v", v), b)
	}
	switch n := node.(type) {
	case map[string]any:
		for _, extra := range []string{"zz", "cache_control", "phase", "prompt_cache_breakpoint", "status"} {
			b := clone(body)
			at(b, path).(map[string]any)[extra] = map[string]any{"cache_control": map[string]any{"type": "ephemeral"}, "zz": 1.0, "phase": "x", "prompt_cache_breakpoint": true, "status": "completed"}[extra]
			fn(path, "+"+extra, b)
		}
		keys := make([]string, 0, len(n))
		for k := range n {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			b := clone(body)
			delete(at(b, path).(map[string]any), k)
			fn(path, "-"+k, b)
		}
		for _, k := range keys {
			eachMutation(body, append(append([]any{}, path...), k), fn)
		}
	case []any:
		if len(n) > 0 {
			b := clone(body)
			set(b, path, append([]any{}, n[1:]...))
			fn(path, "shorter", b)
			b = clone(body)
			set(b, path, append(append([]any{}, n...), n[0]))
			fn(path, "longer", b)
			b = clone(body)
			r := make([]any, len(n))
			for i, v := range n {
				r[len(n)-1-i] = v
			}
			set(b, path, r)
			fn(path, "reversed", b)
		}
		for i := range n {
			eachMutation(body, append(append([]any{}, path...), i), fn)
		}
	}
}

func at(v any, path []any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v
}

func set(body map[string]any, path []any, v any) {
	parent := at(body, path[:len(path)-1])
	switch k := path[len(path)-1].(type) {
	case string:
		parent.(map[string]any)[k] = v
	case int:
		parent.([]any)[k] = v
	}
}

func clone(body map[string]any) map[string]any {
	b, _ := json.Marshal(body)
	var c map[string]any
	json.Unmarshal(bytes.Clone(b), &c)
	return c
}

// TestAgentRequestsReadInOneWalk bounds the allocations of translating an agent's request, the tools
// kept (toolmemo.go): Messages entries and blocks and Responses items and parts are read by jsonx's
// cursor into nodes on the stack, without a map each or a path written for each (the map-per-object
// readers took 150 for Claude Code's request and 221 for Codex's tool turn).
func TestAgentRequestsReadInOneWalk(t *testing.T) {
	claude, codex := agentBody(t, "testdata/request/claude_code.messages.json"), agentBody(t, "testdata/responses/request/codex_tool_turn.request.json")
	messages := testing.AllocsPerRun(50, func() { MessagesToChatWith(claude, Options{}) })
	responses := testing.AllocsPerRun(50, func() { ResponsesToChat(codex, Options{}) })
	t.Logf("allocations: Claude Code %v, Codex tool turn %v", messages, responses)
	if messages > 95 {
		t.Errorf("Claude Code's request: %v allocations, want at most 95", messages)
	}
	if responses > 110 {
		t.Errorf("Codex's tool turn: %v allocations, want at most 110", responses)
	}
}

// TestUnindexed holds unindexed to the regular expression it replaces.
func TestUnindexed(t *testing.T) {
	re := regexp.MustCompile(`\[[0-9]+\]`)
	for _, p := range []string{"", "input", "input[3]", "input[3].content[12].cache_control", "tools[]:namespace",
		"a[", "a[]", "a[1", "a[x]", "[[1]]", "[1][2]", "a[01]b[", "messages[0].content[1]:thinking", "x[1]]", "x[[2]"} {
		if got, want := unindexed(p), re.ReplaceAllString(p, "[]"); got != want {
			t.Errorf("unindexed(%q) = %q, want %q", p, got, want)
		}
	}
}
