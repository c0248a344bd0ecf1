package views

import (
	"encoding/json"
	"net/url"
	"strings"
)

// QuickStart is what the quick-start card needs; it is computed from the deployment alone, so the
// card never calls anything upstream.
type QuickStart struct {
	// BaseURL is what an SDK is configured with; it ends in /v1 (the full operation URL given to an
	// SDK gets a 404).
	BaseURL  string
	AuthMode string
	// Disabled endpoints answer 404 to every call: the card says so above the samples.
	Disabled bool
	Model    string // sent as "model"; ignored by single-target endpoints, but SDKs require one
	// EndpointID and NoKeys: a key-auth endpoint without an enabled key gets a link to the API keys
	// section, where New key is.
	EndpointID string
	NoKeys     bool
	// Messages: the endpoint's model serves the Messages API (Anthropic's), so the card offers its
	// samples and the Claude Code recipe.
	Messages bool
	// An empty Model (multi-model endpoints) leaves "model" out of the cURL sample, which means the
	// default model, and puts a placeholder in the SDK samples.
}

// modelPlaceholder stands for a model id of a multi-model endpoint.
const modelPlaceholder = "<MODEL_ID from GET /v1/models>"

func (q QuickStart) sdkModel() string {
	if q.Model == "" {
		return modelPlaceholder
	}
	return q.Model
}

// OperationURL is the full URL of the chat operation, for raw HTTP clients.
func (q QuickStart) OperationURL() string {
	return q.BaseURL + "/chat/completions"
}

// AnthropicBaseURL is the base URL Anthropic's clients take: the endpoint's without /v1, which they
// append themselves (/v1/messages).
func (q QuickStart) AnthropicBaseURL() string {
	return strings.TrimSuffix(q.BaseURL, "/v1")
}

// The quick start's operations (QSOperation.Value) and languages (Sample.Lang); an agent recipe is
// one text whatever the language (LangAny).
const (
	OpChat      = "chat"
	OpMessages  = "messages"
	OpResponses = "responses"
	OpClaude    = "claude-code"
	OpCodex     = "codex"
	OpAISDK     = "ai-sdk"
	LangCurl    = "curl"
	LangPython  = "python"
	LangJS      = "javascript"
	LangAny     = "any"
)

// QSOperation is one choice of the card's Operation control.
type QSOperation struct {
	Value, Label string
	Agent        bool // a recipe for an agent or framework, in one text
}

// Operations are the card's operations: chat and Responses always, Messages and Claude Code where the
// model serves the Messages API, Codex and the AI SDK (both over Responses).
func (q QuickStart) Operations() []QSOperation {
	ops := []QSOperation{{OpChat, "POST /v1/chat/completions", false}}
	if q.Messages {
		ops = append(ops, QSOperation{OpMessages, "POST /v1/messages (Anthropic)", false})
	}
	ops = append(ops, QSOperation{OpResponses, "POST /v1/responses", false})
	if q.Messages {
		ops = append(ops, QSOperation{OpClaude, "Claude Code", true})
	}
	return append(ops, QSOperation{OpCodex, "Codex", true}, QSOperation{OpAISDK, "AI SDK (JavaScript)", true})
}

// Sample is one ready-to-paste text of the card: an operation in a language.
type Sample struct {
	Op, Lang, Text string
}

// sampleTestID names a sample's element: qs-<lang> for chat (qs-curl, …), qs-<op>-<lang> for another
// operation, qs-<op> for a recipe.
func sampleTestID(s Sample) string {
	switch {
	case s.Op == OpChat:
		return "qs-" + s.Lang
	case s.Lang == LangAny:
		return "qs-" + s.Op
	}
	return "qs-" + s.Op + "-" + s.Lang
}

// Samples are every sample of the card, in the order of Operations, each operation's languages in
// the order of the Language control.
func (q QuickStart) Samples() []Sample {
	s := []Sample{{OpChat, LangCurl, q.CurlSample()}, {OpChat, LangPython, q.PythonSample()}, {OpChat, LangJS, q.JavaScriptSample()}}
	if q.Messages {
		s = append(s, Sample{OpMessages, LangCurl, q.MessagesCurlSample()}, Sample{OpMessages, LangPython, q.MessagesPythonSample()},
			Sample{OpMessages, LangJS, q.MessagesJavaScriptSample()})
	}
	s = append(s, Sample{OpResponses, LangCurl, q.ResponsesCurlSample()}, Sample{OpResponses, LangPython, q.ResponsesPythonSample()},
		Sample{OpResponses, LangJS, q.ResponsesJavaScriptSample()})
	if q.Messages {
		s = append(s, Sample{OpClaude, LangAny, q.ClaudeCodeRecipe()})
	}
	return append(s, Sample{OpCodex, LangAny, q.CodexRecipe()}, Sample{OpAISDK, LangAny, q.AISDKSample()})
}

// placeholderKey is what the samples carry where the user puts a key.
const placeholderKey = "<API_KEY>"

// publicKeyPlaceholder is the key SDK samples pass for a `none` endpoint: SDKs refuse an empty key,
// and the edge ignores whatever is sent.
const publicKeyPlaceholder = "not-needed"

// EdgeBaseURL is the SDK base URL of an endpoint (docs/ARCHITECTURE.md, "Processes"): the path form
// {apiBaseURL}/e/<slug>/v1 while the endpoint's host is under localhost, because many resolvers do
// not resolve *.localhost; otherwise the endpoint's own URL plus /v1.
func EdgeBaseURL(apiBaseURL, endpointURL, slug string) string {
	if UnderLocalhost(endpointURL) {
		return strings.TrimRight(apiBaseURL, "/") + "/e/" + url.PathEscape(slug) + "/v1"
	}
	return strings.TrimRight(endpointURL, "/") + "/v1"
}

// UnderLocalhost reports whether the URL's host, without port, is localhost or *.localhost.
func UnderLocalhost(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	h := strings.ToLower(u.Hostname())
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// CurlSample is a shell command that works when pasted as is (after the key is filled in).
func (q QuickStart) CurlSample() string {
	return q.curl(q.OperationURL(), nil, `"messages": [{"role": "user", "content": "Hello!"}]`)
}

// MessagesCurlSample is the Messages API's call with cURL: Anthropic's headers and max_tokens.
func (q QuickStart) MessagesCurlSample() string {
	return q.curl(q.BaseURL+"/messages", []string{"anthropic-version: 2023-06-01"},
		`"max_tokens": 256, "messages": [{"role": "user", "content": "Hello!"}]`)
}

// ResponsesCurlSample is the Responses API's call with cURL.
func (q QuickStart) ResponsesCurlSample() string {
	return q.curl(q.BaseURL+"/responses", nil, `"input": "Hello!"`)
}

// curl is a POST of a JSON body (members, after "model" when the endpoint names one) with the key's
// header, as a shell command that works when pasted as is (after the key is filled in).
func (q QuickStart) curl(url string, headers []string, members string) string {
	body := `{` + members + `}`
	if q.Model != "" {
		body = `{"model": ` + jsonString(q.Model) + `, ` + members + `}`
	}
	var b strings.Builder
	b.WriteString("curl " + shellQuote(url) + " \\\n")
	b.WriteString("  -H \"Content-Type: application/json\" \\\n")
	for _, h := range headers {
		b.WriteString("  -H \"" + h + "\" \\\n")
	}
	if q.AuthMode != AuthNone {
		b.WriteString("  -H \"Authorization: Bearer " + placeholderKey + "\" \\\n")
	}
	b.WriteString("  -d " + shellQuote(body))
	return b.String()
}

// PythonInstall and JavaScriptInstall are the install lines the samples need; each sample also
// carries its line and the file name to save it under as a comment, so a pasted sample says both.
const (
	PythonInstall     = "pip install openai"
	JavaScriptInstall = "npm install openai"
	PythonFile        = "hello.py"
	// JavaScriptFile ends in .mjs: the sample is an ES module (import, top-level await), which a
	// plain .js file outside a "type": "module" package would run as CommonJS and reject.
	JavaScriptFile = "hello.mjs"
)

// PythonSample uses the OpenAI Python SDK, configured with the base URL ending in /v1.
func (q QuickStart) PythonSample() string {
	return `# ` + PythonInstall + `
# Save as ` + PythonFile + ` and run: python ` + PythonFile + `
from openai import OpenAI

client = OpenAI(
    base_url=` + jsonString(q.BaseURL) + `,
    api_key=` + jsonString(q.sdkKey()) + `,` + q.keyComment("  # ") + `
)

completion = client.chat.completions.create(
    model=` + jsonString(q.sdkModel()) + `,
    messages=[{"role": "user", "content": "Hello!"}],
)
print(completion.choices[0].message.content)`
}

// JavaScriptSample uses the OpenAI JavaScript SDK, configured with the base URL ending in /v1.
func (q QuickStart) JavaScriptSample() string {
	return `// ` + JavaScriptInstall + `
// Save as ` + JavaScriptFile + ` (an ES module) and run: node ` + JavaScriptFile + `
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: ` + jsonString(q.BaseURL) + `,
  apiKey: ` + jsonString(q.sdkKey()) + `,` + q.keyComment(" // ") + `
});

const completion = await client.chat.completions.create({
  model: ` + jsonString(q.sdkModel()) + `,
  messages: [{ role: "user", content: "Hello!" }],
});
console.log(completion.choices[0].message.content);`
}

// Install lines and file names of the Messages, Responses and AI SDK samples.
const (
	AnthropicPythonInstall = "pip install anthropic"
	AnthropicJSInstall     = "npm install @anthropic-ai/sdk"
	AISDKInstall           = "npm install ai @ai-sdk/openai"
	MessagesPythonFile     = "messages.py"
	MessagesJSFile         = "messages.mjs"
	ResponsesPythonFile    = "responses.py"
	ResponsesJSFile        = "responses.mjs"
	AISDKFile              = "ai-sdk.mjs"
)

// MessagesPythonSample uses Anthropic's Python SDK, whose base URL has no /v1.
func (q QuickStart) MessagesPythonSample() string {
	return `# ` + AnthropicPythonInstall + `
# Save as ` + MessagesPythonFile + ` and run: python ` + MessagesPythonFile + `
from anthropic import Anthropic

client = Anthropic(
    base_url=` + jsonString(q.AnthropicBaseURL()) + `,
    api_key=` + jsonString(q.sdkKey()) + `,` + q.keyComment("  # ") + `
)

message = client.messages.create(
    model=` + jsonString(q.sdkModel()) + `,
    max_tokens=256,
    messages=[{"role": "user", "content": "Hello!"}],
)
print(message.content[0].text)`
}

// MessagesJavaScriptSample uses Anthropic's JavaScript SDK, whose base URL has no /v1.
func (q QuickStart) MessagesJavaScriptSample() string {
	return `// ` + AnthropicJSInstall + `
// Save as ` + MessagesJSFile + ` (an ES module) and run: node ` + MessagesJSFile + `
import Anthropic from "@anthropic-ai/sdk";

const client = new Anthropic({
  baseURL: ` + jsonString(q.AnthropicBaseURL()) + `,
  apiKey: ` + jsonString(q.sdkKey()) + `,` + q.keyComment(" // ") + `
});

const message = await client.messages.create({
  model: ` + jsonString(q.sdkModel()) + `,
  max_tokens: 256,
  messages: [{ role: "user", content: "Hello!" }],
});
console.log(message.content[0].text);`
}

// ResponsesPythonSample uses the OpenAI Python SDK's Responses API.
func (q QuickStart) ResponsesPythonSample() string {
	return `# ` + PythonInstall + `
# Save as ` + ResponsesPythonFile + ` and run: python ` + ResponsesPythonFile + `
from openai import OpenAI

client = OpenAI(
    base_url=` + jsonString(q.BaseURL) + `,
    api_key=` + jsonString(q.sdkKey()) + `,` + q.keyComment("  # ") + `
)

response = client.responses.create(
    model=` + jsonString(q.sdkModel()) + `,
    input="Hello!",
)
print(response.output_text)`
}

// ResponsesJavaScriptSample uses the OpenAI JavaScript SDK's Responses API.
func (q QuickStart) ResponsesJavaScriptSample() string {
	return `// ` + JavaScriptInstall + `
// Save as ` + ResponsesJSFile + ` (an ES module) and run: node ` + ResponsesJSFile + `
import OpenAI from "openai";

const client = new OpenAI({
  baseURL: ` + jsonString(q.BaseURL) + `,
  apiKey: ` + jsonString(q.sdkKey()) + `,` + q.keyComment(" // ") + `
});

const response = await client.responses.create({
  model: ` + jsonString(q.sdkModel()) + `,
  input: "Hello!",
});
console.log(response.output_text);`
}

// ClaudeCodeRecipe points Claude Code at the endpoint: its Anthropic base URL (no /v1), the key as a
// bearer token, the model, and no traffic to anywhere else.
func (q QuickStart) ClaudeCodeRecipe() string {
	return `# Claude Code through this endpoint (npm install -g @anthropic-ai/claude-code)
export ANTHROPIC_BASE_URL=` + shellQuote(q.AnthropicBaseURL()) + `
export ANTHROPIC_AUTH_TOKEN=` + shellQuote(q.sdkKey()) + q.keyComment("  # ") + `
export ANTHROPIC_MODEL=` + shellQuote(q.sdkModel()) + `
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
claude`
}

// CodexRecipe is a Codex provider for the endpoint, over the Responses API (the only one Codex speaks).
func (q QuickStart) CodexRecipe() string {
	return `# Codex through this endpoint (npm install -g @openai/codex): put this in ~/.codex/config.toml,
# then run: export SVC_API_KEY=` + shellQuote(q.sdkKey()) + `; codex
model = ` + jsonString(q.sdkModel()) + `
model_provider = "svc"

[model_providers.svc]
name = "svc"
base_url = ` + jsonString(q.BaseURL) + `
env_key = "SVC_API_KEY"
wire_api = "responses"`
}

// AISDKSample uses the AI SDK's OpenAI provider with the endpoint's base URL (it calls the Responses API).
func (q QuickStart) AISDKSample() string {
	return `// ` + AISDKInstall + `
// Save as ` + AISDKFile + ` (an ES module) and run: node ` + AISDKFile + `
import { generateText } from "ai";
import { createOpenAI } from "@ai-sdk/openai";

const svc = createOpenAI({
  baseURL: ` + jsonString(q.BaseURL) + `,
  apiKey: ` + jsonString(q.sdkKey()) + `,` + q.keyComment(" // ") + `
});

const { text } = await generateText({
  model: svc(` + jsonString(q.sdkModel()) + `),
  prompt: "Hello!",
});
console.log(text);`
}

func (q QuickStart) sdkKey() string {
	if q.AuthMode == AuthNone {
		return publicKeyPlaceholder
	}
	return placeholderKey
}

func (q QuickStart) keyComment(prefix string) string {
	if q.AuthMode == AuthNone {
		return prefix + "any non-empty value: this endpoint needs no key"
	}
	return ""
}

// jsonString quotes s as a JSON string, which is also a valid Python and JavaScript literal.
// HTML escaping is off: the text is shown as text (templ escapes it), and "\u003cAPI_KEY\u003e"
// would be unreadable.
func jsonString(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// shellQuote wraps s in single quotes for sh, so nothing in it is expanded.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
