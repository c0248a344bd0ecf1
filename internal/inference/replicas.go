package inference

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/svcdev/svc/internal/fleet"
)

// Replicas is the models file's replicas: a list of base URLs, or {dns: host:port}, the addresses of
// a name (a headless Service) each serving /v1 on that port (docs/LORA.md, "Fleets").
type Replicas struct {
	DNS  string   // host:port; "" for a list
	URLs []string // the list's base URLs, each ending in /v1 by convention
}

// UnmarshalYAML takes a sequence of URLs or a mapping with the one key dns; Validate checks the
// values so that its errors can name the model.
func (r *Replicas) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.SequenceNode:
		r.URLs = []string{}
		return n.Decode(&r.URLs)
	case yaml.MappingNode:
		var m struct {
			DNS string `yaml:"dns"`
		}
		if len(n.Content) == 2 && n.Content[0].Value == "dns" && n.Content[1].Kind == yaml.ScalarNode {
			if err := n.Decode(&m); err == nil {
				r.DNS = m.DNS
				return nil
			}
		}
	}
	return fmt.Errorf("line %d: replicas must be a list of URLs or {dns: host:port}", n.Line)
}

// validateReplicas checks a model's replicas, routing and maxLoras, normalises the URLs, and points
// upstreamUrl and loraTargets at the replicas: with lora: vllm, loraTargets gives the model its pool of
// adapters kept on every replica, which reads the replicas from the model's fleet (loraPool.fleet).
func validateReplicas(m *ModelConfig) error {
	if m.Replicas == nil {
		if m.Routing != "" || m.MaxLoras != 0 {
			return fmt.Errorf("routing and maxLoras are only for a model with replicas")
		}
		return nil
	}
	// Validate may run again on its own output (NewRegistryWith does): upstreamUrl and loraTargets
	// set from the replicas are theirs, not the file's.
	upstream, targets := m.UpstreamURL, m.LoraTargets
	m.UpstreamURL, m.LoraTargets = "", nil
	if err := replicasUpstream(m); err != nil {
		return err
	}
	if upstream != "" && upstream != m.UpstreamURL {
		return fmt.Errorf("set upstreamUrl (one upstream) or replicas, not both")
	}
	if targets != nil && (m.LoraTargets == nil || fmt.Sprint(*targets) != fmt.Sprint(*m.LoraTargets)) {
		return fmt.Errorf("loraTargets is for upstreamUrl; with replicas, adapters are loaded on the replicas")
	}
	return nil
}

// replicasUpstream checks and normalises the replicas, and sets upstreamUrl and loraTargets from them.
func replicasUpstream(m *ModelConfig) error {
	if _, err := fleet.ParseMode(m.Routing); err != nil {
		return err
	}
	if m.Routing == "" {
		m.Routing = fleet.Affinity.String()
	}
	if m.MaxLoras < 0 || m.MaxLoras > 0 && m.Lora == LoraNone {
		return fmt.Errorf("maxLoras must be a positive number of adapter slots, on a model with lora: %s or %s", LoraVLLM, LoraResolver)
	}
	// A copy: the URLs are normalised below, and the caller's config must stay as it was.
	r := &Replicas{DNS: m.Replicas.DNS, URLs: append([]string(nil), m.Replicas.URLs...)}
	if m.Replicas.URLs != nil && r.URLs == nil {
		r.URLs = []string{}
	}
	m.Replicas = r
	if r.URLs == nil {
		host, port, err := net.SplitHostPort(r.DNS)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("replicas: dns %q is not host:port (e.g. vllm-headless:8000)", r.DNS)
		}
		if net.ParseIP(host) != nil {
			return fmt.Errorf("replicas: dns needs a host name (e.g. a headless Service), not the address %s", host)
		}
		m.UpstreamURL = "http://" + r.DNS + "/v1"
		if m.Lora == LoraVLLM {
			m.LoraTargets = &LoraTargets{Mode: LoraTargetsDNS}
		}
		return nil
	}
	if len(r.URLs) == 0 || len(r.URLs) > fleet.MaxReplicas {
		return fmt.Errorf("replicas lists %d URLs (want 1 to %d)", len(r.URLs), fleet.MaxReplicas)
	}
	seen := map[string]bool{}
	for i, raw := range r.URLs {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("replicas[%d] %q is not an http(s) URL (e.g. http://10.0.0.11:8000/v1)", i, raw)
		}
		r.URLs[i] = strings.TrimRight(raw, "/")
		if seen[r.URLs[i]] {
			return fmt.Errorf("replicas[%d] %q is listed twice", i, raw)
		}
		seen[r.URLs[i]] = true
	}
	m.UpstreamURL = r.URLs[0]
	if m.Lora == LoraVLLM {
		m.LoraTargets = &LoraTargets{URLs: append([]string(nil), r.URLs...)}
	}
	return nil
}
