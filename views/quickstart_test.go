package views

import (
	"strings"
	"testing"
)

func TestEdgeBaseURL(t *testing.T) {
	cases := []struct{ api, url, slug, want string }{
		{"http://localhost:8080", "http://demo.localhost:8080", "demo", "http://localhost:8080/e/demo/v1"},
		{"http://localhost:8080/", "http://demo.localhost:8080", "demo", "http://localhost:8080/e/demo/v1"},
		{"http://127.0.0.1:9000", "http://demo.LOCALHOST:9000", "demo", "http://127.0.0.1:9000/e/demo/v1"},
		{"https://api.example.com", "https://demo.ep.example.com", "demo", "https://demo.ep.example.com/v1"},
		// Only the host decides: "localhost" elsewhere in the name is a real domain.
		{"https://api.example.com", "https://demo.localhost.example.com", "demo", "https://demo.localhost.example.com/v1"},
	}
	for _, c := range cases {
		if got := EdgeBaseURL(c.api, c.url, c.slug); got != c.want {
			t.Errorf("EdgeBaseURL(%q, %q) = %q, want %q", c.api, c.url, got, c.want)
		}
	}
}

func TestSamplesByAuthMode(t *testing.T) {
	fixed := QuickStart{BaseURL: "http://localhost:8080/e/demo/v1", AuthMode: AuthFixedAPIKey, Model: "demo-echo"}
	curl := fixed.CurlSample()
	for _, want := range []string{"curl 'http://localhost:8080/e/demo/v1/chat/completions'", `-H "Authorization: Bearer <API_KEY>"`, `"model": "demo-echo"`} {
		if !strings.Contains(curl, want) {
			t.Errorf("cURL lacks %q:\n%s", want, curl)
		}
	}
	if !strings.Contains(fixed.PythonSample(), `base_url="http://localhost:8080/e/demo/v1"`) ||
		!strings.Contains(fixed.PythonSample(), `api_key="<API_KEY>"`) {
		t.Errorf("python:\n%s", fixed.PythonSample())
	}
	if !strings.Contains(fixed.JavaScriptSample(), `apiKey: "<API_KEY>"`) ||
		!strings.Contains(fixed.JavaScriptSample(), `baseURL: "http://localhost:8080/e/demo/v1"`) {
		t.Errorf("js:\n%s", fixed.JavaScriptSample())
	}

	open := fixed
	open.AuthMode = AuthNone
	if strings.Contains(open.CurlSample(), "Authorization") {
		t.Errorf("none mode cURL has a header:\n%s", open.CurlSample())
	}
	for name, s := range map[string]string{"python": open.PythonSample(), "js": open.JavaScriptSample()} {
		if !strings.Contains(s, `"not-needed"`) || strings.Contains(s, `""`) {
			t.Errorf("%s none mode key:\n%s", name, s)
		}
	}

	multi := QuickStart{BaseURL: "https://x.example.com/v1", Model: ""}
	if strings.Contains(multi.CurlSample(), `"model"`) {
		t.Errorf("multi-model cURL pins a model:\n%s", multi.CurlSample())
	}
}

// A pasted SDK sample says what to install and which file name to run it under: the JavaScript one is
// an ES module, so its file must end in .mjs.
func TestSamplesSayInstallAndFile(t *testing.T) {
	q := QuickStart{BaseURL: "http://localhost:8080/e/demo/v1", AuthMode: AuthFixedAPIKey, Model: "demo-echo"}
	py, js := q.PythonSample(), q.JavaScriptSample()
	if !strings.HasPrefix(py, "# pip install openai\n") || !strings.Contains(py, "python hello.py") {
		t.Errorf("python sample lacks its install line or file name:\n%s", py)
	}
	if !strings.HasPrefix(js, "// npm install openai\n") || !strings.Contains(js, "node hello.mjs") {
		t.Errorf("javascript sample lacks its install line or file name:\n%s", js)
	}
}

// The Python samples of Messages and Responses (no Python runs in the tests: their text is checked):
// Anthropic's SDK with the base URL without /v1, openai's responses.create; a model without the
// Messages API gets neither its samples nor Claude Code.
func TestMessagesAndResponsesPythonSamples(t *testing.T) {
	q := QuickStart{BaseURL: "http://localhost:8080/e/demo/v1", AuthMode: AuthFixedAPIKey, Model: "demo-echo", Messages: true}
	py := q.MessagesPythonSample()
	for _, want := range []string{"# pip install anthropic\n", "python messages.py", "from anthropic import Anthropic",
		`base_url="http://localhost:8080/e/demo",`, `api_key="<API_KEY>",`, "client.messages.create(", `model="demo-echo",`,
		"max_tokens=256,", `messages=[{"role": "user", "content": "Hello!"}],`, "print(message.content[0].text)"} {
		if !strings.Contains(py, want) {
			t.Errorf("Messages python lacks %q:\n%s", want, py)
		}
	}
	py = q.ResponsesPythonSample()
	for _, want := range []string{"# pip install openai\n", "python responses.py", `base_url="http://localhost:8080/e/demo/v1",`,
		"client.responses.create(", `input="Hello!",`, "print(response.output_text)"} {
		if !strings.Contains(py, want) {
			t.Errorf("Responses python lacks %q:\n%s", want, py)
		}
	}
	ops := func(q QuickStart) string {
		var s []string
		for _, o := range q.Operations() {
			s = append(s, o.Value)
		}
		return strings.Join(s, " ")
	}
	if got := ops(q); got != "chat messages responses claude-code codex ai-sdk" {
		t.Errorf("operations with Messages: %s", got)
	}
	q.Messages = false
	if got := ops(q); got != "chat responses codex ai-sdk" {
		t.Errorf("operations without Messages: %s", got)
	}
	for _, s := range q.Samples() {
		if s.Op == OpMessages || s.Op == OpClaude {
			t.Errorf("a model without the Messages API has the sample %s/%s", s.Op, s.Lang)
		}
	}
}
