package inference

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestValidateNamesTheEntry(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"models:\n  - name: a\n  - name: b\n  - name: foo\n    runtime: openai\n", `models.yaml: models[2] "foo": runtime "openai" needs upstreamUrl`},
		{"models:\n  - name: a\n    runtime: gpu\n", `models[0] "a": runtime "gpu" is not one of`},
		{"models:\n  - name: a\n    public: true\n    default: true\n  - name: b\n    public: true\n    default: true\n", `are both default`},
		{"models:\n  - name: a\n    default: true\n", `the default model must be public`},
		{"models:\n  - name: a\n  - name: a\n", `name already used by models[0]`},
		{"models:\n  - name: a\n    upstreamUrl: http://x/v1\n", `upstreamUrl is only for runtime "openai"`},
		{"models:\n  - name: a\n    runtime: openai\n    upstreamUrl: ftp://x\n", `is not an http(s) URL`},
		{"models:\n  - name: a\n    runtime: openai\n    upstreamUrl: http://x/v1\n    apiKeyEnv: SVC_SURELY_UNSET_VAR\n", `SVC_SURELY_UNSET_VAR, which is not set`},
		{"models:\n  - name: a\n    simulator: {mode: poetry}\n", `simulator mode "poetry"`},
		{"models:\n  - name: a\n    upstreamUrll: x\n", `field upstreamUrll not found`},
		{"", `no models listed`},
	}
	for _, c := range cases {
		_, err := ParseModels("models.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}

func TestDefaultIsFirstPublicWhenUnset(t *testing.T) {
	models, err := ParseModels("m", []byte("models:\n  - name: base\n  - name: a\n    public: true\n  - name: b\n    public: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if models[0].Default || !models[1].Default || models[2].Default {
		t.Fatalf("defaults %v %v %v", models[0].Default, models[1].Default, models[2].Default)
	}
}

func TestBuiltinAndExampleFile(t *testing.T) {
	r, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	def, ok := r.Default()
	if !ok || def.ID != "sim-llama-3.1-8b-instruct" || !def.SupportsMessages || !def.Simulated {
		t.Fatalf("builtin default %+v", def)
	}
	t.Setenv("VLLM_API_KEY", "x")
	if _, err := Load("../../models.example.yaml"); err != nil {
		t.Fatalf("models.example.yaml: %v", err)
	}
}

func TestRewriteModel(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{"id":"x","model":"up","choices":[{"model":"inner"}]}`, `{"id":"x","model":"served","choices":[{"model":"inner"}]}`},
		{`{"a":{"model":"inner"},"model" : "up"}`, `{"a":{"model":"inner"},"model" : "served"}`},
		{`{"content":"\"model\":\"up\"","x":1}`, `{"content":"\"model\":\"up\"","x":1}`},
		{`{"model":"with \" quote"}`, `{"model":"served"}`},
		// An escaped key is the same key to JSON clients (found by FuzzRewriteModel).
		{`{"\u006dodel":"up"}`, `{"\u006dodel":"served"}`},
	}
	for _, c := range cases {
		if got := string(RewriteModel([]byte(c.in), []byte(`"served"`))); got != c.want {
			t.Errorf("RewriteModel(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestSimulatorDeterministicLorem(t *testing.T) {
	r, _ := NewRegistry([]ModelConfig{{Name: "l", Public: true, Simulator: &SimulatorConfig{Mode: ModeLorem, LoremTokens: 12}}})
	call := func() *Call {
		return &Call{Model: "l", Served: "l", Messages: []Message{{Role: "user", Content: "hi"}}}
	}
	a, _ := r.Runtime("l").Complete(context.Background(), call())
	b, _ := r.Runtime("l").Complete(context.Background(), call())
	if a.Content != b.Content || a.Usage.CompletionTokens != 12 {
		t.Fatalf("lorem not deterministic or wrong length: %q %q", a.Content, b.Content)
	}
	st, _ := r.Runtime("l").Stream(context.Background(), call())
	var sb strings.Builder
	for {
		ch, err := st.Next()
		if err == io.EOF {
			break
		}
		for _, c := range ch.Choices {
			sb.WriteString(c.Content)
		}
	}
	if sb.String() != a.Content {
		t.Fatalf("stream %q != complete %q", sb.String(), a.Content)
	}
}
