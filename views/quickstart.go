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

// OperationURL is the full URL of the one operation the card offers, for raw HTTP clients.
func (q QuickStart) OperationURL() string {
	return q.BaseURL + "/chat/completions"
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
	body := `{"messages": [{"role": "user", "content": "Hello!"}]}`
	if q.Model != "" {
		body = `{"model": ` + jsonString(q.Model) + `, "messages": [{"role": "user", "content": "Hello!"}]}`
	}
	var b strings.Builder
	b.WriteString("curl " + shellQuote(q.OperationURL()) + " \\\n")
	b.WriteString("  -H \"Content-Type: application/json\" \\\n")
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
