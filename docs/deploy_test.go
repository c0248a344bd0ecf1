package docs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/svcdev/svc/internal/inference"
)

// object is one Kubernetes manifest, as parsed.
type object map[string]any

func (o object) str(path ...string) string {
	v, _ := dig(map[string]any(o), path...).(string)
	return v
}

func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func list(v any) []any { l, _ := v.([]any); return l }

func labels(v any) map[string]string {
	out := map[string]string{}
	m, _ := v.(map[string]any)
	for k, val := range m {
		s, _ := val.(string)
		out[k] = s
	}
	return out
}

// deployManifests returns the Kubernetes objects of the yaml blocks of DEPLOY.md.
func deployManifests(t *testing.T) []object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []object
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(b, -1) {
		dec := yaml.NewDecoder(bytes.NewReader(m[1]))
		for {
			var o map[string]any // not object: nested mappings would take its type
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("DEPLOY.md: a manifest is not YAML: %v", err)
			}
			if o != nil {
				out = append(out, object(o))
			}
		}
	}
	return out
}

// TestDeployManifestsAreKubernetes checks the Kubernetes example of DEPLOY.md: every document is a
// Kubernetes object, and the objects fit together (selectors match pod labels, Services reach named
// ports, mounts name volumes, the ConfigMap's models file is one svc accepts, the StatefulSet has its
// volume and governing Service, and a headless Service exists for loraTargets: dns).
func TestDeployManifestsAreKubernetes(t *testing.T) {
	objs := deployManifests(t)
	if len(objs) < 6 {
		t.Fatalf("DEPLOY.md has %d Kubernetes objects; did its example go?", len(objs))
	}
	kinds := map[string]map[string]object{}
	for _, o := range objs {
		kind, name := o.str("kind"), o.str("metadata", "name")
		if o.str("apiVersion") == "" || kind == "" || name == "" {
			t.Fatalf("not a Kubernetes object (apiVersion, kind, metadata.name): %v", o)
		}
		if kind != "Namespace" && o.str("metadata", "namespace") == "" {
			t.Errorf("%s %s has no namespace", kind, name)
		}
		if kinds[kind] == nil {
			kinds[kind] = map[string]object{}
		}
		kinds[kind][name] = o
	}
	for _, want := range []string{"StatefulSet", "Deployment", "Service", "ConfigMap"} {
		if len(kinds[want]) == 0 {
			t.Fatalf("the example has no %s", want)
		}
	}

	// Pod templates: selectors, containers, mounts.
	type pod struct {
		labels map[string]string
		ports  map[string]bool
	}
	var pods []pod
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for name, o := range kinds[kind] {
			spec := dig(map[string]any(o), "spec")
			tpl := dig(spec, "template")
			podLabels := labels(dig(tpl, "metadata", "labels"))
			for k, v := range labels(dig(spec, "selector", "matchLabels")) {
				if podLabels[k] != v {
					t.Errorf("%s %s: selector %s=%s does not match its pod labels %v", kind, name, k, v, podLabels)
				}
			}
			volumes := map[string]bool{}
			for _, v := range list(dig(tpl, "spec", "volumes")) {
				volumes[dig(v, "name").(string)] = true
				if cm, ok := dig(v, "configMap", "name").(string); ok && kinds["ConfigMap"][cm] == nil {
					t.Errorf("%s %s mounts ConfigMap %s, which the example does not define", kind, name, cm)
				}
			}
			for _, v := range list(dig(spec, "volumeClaimTemplates")) {
				volumes[dig(v, "metadata", "name").(string)] = true
			}
			p := pod{labels: podLabels, ports: map[string]bool{}}
			containers := list(dig(tpl, "spec", "containers"))
			if len(containers) == 0 {
				t.Errorf("%s %s has no container", kind, name)
			}
			for _, c := range containers {
				if dig(c, "name") == nil || dig(c, "image") == nil {
					t.Errorf("%s %s: a container without name or image", kind, name)
				}
				for _, m := range list(dig(c, "volumeMounts")) {
					if !volumes[dig(m, "name").(string)] {
						t.Errorf("%s %s mounts %v, which is not one of its volumes", kind, name, dig(m, "name"))
					}
				}
				for _, port := range list(dig(c, "ports")) {
					if n, ok := dig(port, "name").(string); ok {
						p.ports[n] = true
					}
					if n, ok := dig(port, "containerPort").(int); ok {
						p.ports[strconv.Itoa(n)] = true
					}
				}
			}
			pods = append(pods, p)
			if kind == "StatefulSet" {
				if kinds["Service"][dig(spec, "serviceName").(string)] == nil {
					t.Errorf("StatefulSet %s: its serviceName is not a Service of the example", name)
				}
				if len(list(dig(spec, "volumeClaimTemplates"))) == 0 {
					t.Errorf("StatefulSet %s keeps its database on no volume", name)
				}
			}
		}
	}

	headless := false
	for name, svc := range kinds["Service"] {
		sel := labels(dig(map[string]any(svc), "spec", "selector"))
		var match *pod
		for i := range pods {
			ok := len(sel) > 0
			for k, v := range sel {
				ok = ok && pods[i].labels[k] == v
			}
			if ok {
				match = &pods[i]
			}
		}
		if match == nil {
			t.Errorf("Service %s selects no pod of the example", name)
			continue
		}
		for _, port := range list(dig(map[string]any(svc), "spec", "ports")) {
			target := dig(port, "targetPort")
			if s, ok := target.(int); ok {
				target = strconv.Itoa(s)
			}
			if s, ok := target.(string); ok && !match.ports[s] {
				t.Errorf("Service %s targets port %s, which its pods do not declare", name, s)
			}
		}
		if svc.str("spec", "clusterIP") == "None" {
			headless = true
		}
	}
	if !headless {
		t.Error("the example has no headless Service for loraTargets: dns")
	}

	for name, cm := range kinds["ConfigMap"] {
		data, ok := dig(map[string]any(cm), "data", "models.yaml").(string)
		if !ok {
			continue
		}
		models, err := inference.ParseModels("DEPLOY.md ConfigMap "+name, []byte(data))
		if err == nil {
			err = inference.Validate("DEPLOY.md ConfigMap "+name, models)
		}
		if err != nil {
			t.Errorf("the models file of ConfigMap %s is not one svc accepts: %v", name, err)
		}
	}
}
