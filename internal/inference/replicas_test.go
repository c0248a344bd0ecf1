package inference

import (
	"strings"
	"testing"
)

func TestReplicasValidation(t *testing.T) {
	const head = "models:\n  - name: fleet\n    runtime: openai\n"
	cases := []struct{ yaml, want string }{
		{head + "    upstreamUrl: http://gw/v1\n    replicas: [http://10.0.0.1:8000/v1]\n", `models[0] "fleet": set upstreamUrl (one upstream) or replicas, not both`},
		{head + "    replicas: []\n", `replicas lists 0 URLs (want 1 to 64)`},
		{head + "    replicas: [http://a/v1, ftp://b]\n", `replicas[1] "ftp://b" is not an http(s) URL`},
		{head + "    replicas: [http://a/v1, http://a/v1/]\n", `replicas[1] "http://a/v1/" is listed twice`},
		{head + "    replicas: {dns: vllm-headless}\n", `replicas: dns "vllm-headless" is not host:port`},
		{head + "    replicas: {dns: 10.0.0.1:8000}\n", `replicas: dns needs a host name`},
		{head + "    replicas: {srv: x}\n", `replicas must be a list of URLs or {dns: host:port}`},
		{head + "    replicas: http://a/v1\n", `replicas must be a list of URLs or {dns: host:port}`},
		{head + "    replicas: [http://a/v1]\n    routing: random\n", `routing "random" is not one of affinity, least-loaded, round-robin`},
		{head + "    upstreamUrl: http://gw/v1\n    routing: affinity\n", `routing and maxLoras are only for a model with replicas`},
		{head + "    replicas: [http://a/v1]\n    maxLoras: 2\n", `maxLoras must be a positive number of adapter slots, on a model with lora: vllm or resolver`},
		{head + "    replicas: [http://a/v1]\n    lora: vllm\n    maxLoras: -1\n", `maxLoras must be a positive number`},
		{head + "    replicas: [http://a/v1]\n    lora: vllm\n    loraTargets: dns\n", `loraTargets is for upstreamUrl; with replicas, adapters are loaded on the replicas`},
		{"models:\n  - name: sim\n    replicas: [http://a/v1]\n", `models[0] "sim": replicas is only for runtime "openai"`},
		{"models:\n  - name: sim\n    routing: affinity\n", `models[0] "sim": routing is only for runtime "openai"`},
		{head + "    lora: vllm\n", `runtime "openai" needs upstreamUrl or replicas`},
	}
	for _, c := range cases {
		_, err := ParseModels("models.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.yaml, err, c.want)
		}
	}

	models, err := ParseModels("models.yaml", []byte(head+"    replicas: [http://10.0.0.11:8000/v1/, http://10.0.0.12:8000/v1]\n    lora: vllm\n    maxLoras: 2\n"+
		"  - name: headless\n    runtime: openai\n    replicas: {dns: vllm-headless:8000}\n    routing: least-loaded\n    lora: vllm\n"+
		"  - name: one\n    runtime: openai\n    upstreamUrl: http://gw/v1\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := models[0]
	if strings.Join(m.Replicas.URLs, " ") != "http://10.0.0.11:8000/v1 http://10.0.0.12:8000/v1" || m.Routing != "affinity" || m.MaxLoras != 2 {
		t.Errorf("list replicas: %+v %q %d", m.Replicas, m.Routing, m.MaxLoras)
	}
	// Adapters are loaded on every replica, by the loraTargets machinery.
	if m.LoraTargets == nil || strings.Join(m.LoraTargets.URLs, " ") != strings.Join(m.Replicas.URLs, " ") || m.UpstreamURL != m.Replicas.URLs[0] {
		t.Errorf("list replicas' adapter targets %+v, upstream %q", m.LoraTargets, m.UpstreamURL)
	}
	h := models[1]
	if h.Replicas.DNS != "vllm-headless:8000" || h.Routing != "least-loaded" || h.UpstreamURL != "http://vllm-headless:8000/v1" ||
		h.LoraTargets == nil || h.LoraTargets.Mode != LoraTargetsDNS {
		t.Errorf("dns replicas: %+v %q %q %+v", h.Replicas, h.Routing, h.UpstreamURL, h.LoraTargets)
	}
	// A model with only upstreamUrl is as before.
	if o := models[2]; o.Replicas != nil || o.Routing != "" || o.LoraTargets != nil || o.UpstreamURL != "http://gw/v1" {
		t.Errorf("upstreamUrl model changed: %+v", o)
	}
}
