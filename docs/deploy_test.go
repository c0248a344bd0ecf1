package docs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	svcimage "github.com/svcdev/svc/internal/image"
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

// byNamespace groups the objects of DEPLOY.md by namespace, then kind, then name: each namespace is one
// example that must stand on its own.
func byNamespace(t *testing.T, objs []object) map[string]map[string]map[string]object {
	t.Helper()
	out := map[string]map[string]map[string]object{}
	for _, o := range objs {
		kind, name := o.str("kind"), o.str("metadata", "name")
		if o.str("apiVersion") == "" || kind == "" || name == "" {
			t.Fatalf("not a Kubernetes object (apiVersion, kind, metadata.name): %v", o)
		}
		ns := o.str("metadata", "namespace")
		if kind == "Namespace" {
			ns = name
		} else if ns == "" {
			t.Errorf("%s %s has no namespace", kind, name)
		}
		if out[ns] == nil {
			out[ns] = map[string]map[string]object{}
		}
		if out[ns][kind] == nil {
			out[ns][kind] = map[string]object{}
		}
		if out[ns][kind][name] != nil {
			t.Errorf("%s %s/%s is defined twice", kind, ns, name)
		}
		out[ns][kind][name] = o
	}
	return out
}

// TestDeployManifestsAreKubernetes checks the Kubernetes examples of DEPLOY.md: every document is a
// Kubernetes object, and in each namespace the objects fit together (the Namespace exists, selectors
// match pod labels, Services and probes reach declared ports, mounts name volumes, the ConfigMap's
// models file is one svc accepts, a StatefulSet has its volume and governing Service, and the example
// with vLLM has a headless Service for replicas: {dns: …}).
func TestDeployManifestsAreKubernetes(t *testing.T) {
	objs := deployManifests(t)
	if len(objs) < 12 {
		t.Fatalf("DEPLOY.md has %d Kubernetes objects; did its examples go?", len(objs))
	}
	for ns, kinds := range byNamespace(t, objs) {
		if kinds["Namespace"][ns] == nil {
			t.Errorf("namespace %s is used but not defined", ns)
		}
		checkExample(t, ns, kinds)
	}
}

func checkExample(t *testing.T, ns string, kinds map[string]map[string]object) {
	// Pod templates: selectors, containers, mounts, probes.
	type pod struct {
		labels map[string]string
		ports  map[string]bool
		vllm   bool
	}
	var pods []pod
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for name, o := range kinds[kind] {
			name = ns + "/" + name
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
				if img, _ := dig(c, "image").(string); strings.HasPrefix(img, "vllm/") {
					p.vllm = true
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
				for _, probe := range []string{"readinessProbe", "livenessProbe"} {
					if port, ok := dig(c, probe, "httpGet", "port").(string); ok && !p.ports[port] {
						t.Errorf("%s %s: its %s asks port %s, which the container does not declare", kind, name, probe, port)
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

	headless, vllm := false, false
	for _, p := range pods {
		vllm = vllm || p.vllm
	}
	for _, kind := range []string{"Service", "PodDisruptionBudget"} {
		for name, svc := range kinds[kind] {
			sel := labels(dig(map[string]any(svc), "spec", "selector"))
			if kind == "PodDisruptionBudget" {
				sel = labels(dig(map[string]any(svc), "spec", "selector", "matchLabels"))
			}
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
				t.Errorf("%s %s/%s selects no pod of the example", kind, ns, name)
				continue
			}
			for _, port := range list(dig(map[string]any(svc), "spec", "ports")) {
				target := dig(port, "targetPort")
				if s, ok := target.(int); ok {
					target = strconv.Itoa(s)
				}
				if s, ok := target.(string); ok && !match.ports[s] {
					t.Errorf("Service %s/%s targets port %s, which its pods do not declare", ns, name, s)
				}
			}
			if svc.str("spec", "clusterIP") == "None" {
				headless = true
			}
		}
	}
	if vllm && !headless {
		t.Errorf("the example %s runs vLLM but has no headless Service for replicas: {dns: …}", ns)
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
			t.Errorf("the models file of ConfigMap %s/%s is not one svc accepts: %v", ns, name, err)
		}
	}
}

// svcContainer is a workload whose container runs svc, with what the checks below need of it.
type svcContainer struct {
	kind, name, command string
	replicas            int
	podSpec, container  any
	env                 map[string]any // name → the env entry
	mounts              map[string]bool
}

// svcContainers lists the containers of DEPLOY.md's examples that run the svc image, by namespace.
func svcContainers(kinds map[string]map[string]object, image string) []svcContainer {
	var out []svcContainer
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for name, o := range kinds[kind] {
			spec := dig(map[string]any(o), "spec")
			podSpec := dig(spec, "template", "spec")
			for _, c := range list(dig(podSpec, "containers")) {
				img, _ := dig(c, "image").(string)
				if !strings.HasPrefix(img, image+":") {
					continue
				}
				sc := svcContainer{kind: kind, name: name, podSpec: podSpec, container: c, env: map[string]any{}, mounts: map[string]bool{}}
				sc.replicas, _ = dig(spec, "replicas").(int)
				if args := list(dig(c, "args")); len(args) > 0 {
					sc.command, _ = args[0].(string)
				}
				for _, e := range list(dig(c, "env")) {
					n, _ := dig(e, "name").(string)
					sc.env[n] = e
				}
				for _, m := range list(dig(c, "volumeMounts")) {
					p, _ := dig(m, "mountPath").(string)
					sc.mounts[p] = true
				}
				out = append(out, sc)
			}
		}
	}
	return out
}

// pushedImage is the repository the README's `crane push` line pushes the image to.
func pushedImage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`crane push bin/svc-image\.tar ([^\s:]+):`).FindSubmatch(b)
	if m == nil {
		t.Fatal("README.md does not say how to push the image (crane push bin/svc-image.tar REPOSITORY:TAG)")
	}
	return string(m[1])
}

// TestDeployManifestsRunTheImage checks what DEPLOY.md's examples ask of svc: they run the image the
// README pushes, as the image's non-root user; the production example runs the control plane as a
// Deployment of several replicas on PostgreSQL and Redis and the edges as a Deployment that is ready on
// /readyz; the trying example is a StatefulSet of exactly one on SQLite, its data on a volume; every
// Secret they read is one the text says how to create.
func TestDeployManifestsRunTheImage(t *testing.T) {
	image := pushedImage(t)
	raw, err := os.ReadFile(filepath.Join(root, "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	examples := byNamespace(t, deployManifests(t))
	for _, ns := range []string{"svc", "svc-try"} {
		if examples[ns] == nil {
			t.Fatalf("DEPLOY.md has no example in namespace %s", ns)
		}
	}
	var servers, edges, tries []svcContainer
	for ns, kinds := range examples {
		for _, c := range svcContainers(kinds, image) {
			where := c.kind + " " + ns + "/" + c.name
			if user, _ := dig(c.podSpec, "securityContext", "runAsUser").(int); strconv.Itoa(user) != svcimage.User ||
				dig(c.podSpec, "securityContext", "runAsNonRoot") != true {
				t.Errorf("%s: runs as %v, want runAsNonRoot and the image's user %s", where, dig(c.podSpec, "securityContext"), svcimage.User)
			}
			if dig(c.container, "securityContext", "readOnlyRootFilesystem") == true && !c.mounts["/tmp"] {
				t.Errorf("%s: a read-only root file system and no /tmp volume", where)
			}
			for _, probe := range [][2]string{{"readinessProbe", "/readyz"}, {"livenessProbe", "/healthz"}} {
				if got, _ := dig(c.container, probe[0], "httpGet", "path").(string); got != probe[1] {
					t.Errorf("%s: %s on %q, want %s", where, probe[0], got, probe[1])
				}
			}
			for n, e := range c.env {
				if secret, ok := dig(e, "valueFrom", "secretKeyRef", "name").(string); ok &&
					!bytes.Contains(raw, []byte("create secret generic "+secret+" ")) {
					t.Errorf("%s: env %s reads Secret %s, which DEPLOY.md never says how to create", where, n, secret)
				}
			}
			switch {
			case ns == "svc" && c.command == "server":
				servers = append(servers, c)
			case ns == "svc" && c.command == "edge":
				edges = append(edges, c)
			case ns == "svc-try" && c.command == "server":
				tries = append(tries, c)
			default:
				t.Errorf("%s runs svc %q, which neither example expects", where, c.command)
			}
		}
	}
	if len(servers) != 1 || len(edges) != 1 || len(tries) != 1 {
		t.Fatalf("%d control planes, %d edge workloads in the production example and %d servers in the trying one; want one each",
			len(servers), len(edges), len(tries))
	}
	cp, edge, try := servers[0], edges[0], tries[0]
	if cp.kind != "Deployment" || cp.replicas < 2 {
		t.Errorf("production control plane: %s of %d replicas, want a Deployment of several", cp.kind, cp.replicas)
	}
	if cp.env["SVC_DATABASE_URL"] == nil || cp.env["SVC_REDIS_URL"] == nil {
		t.Errorf("production control plane: no PostgreSQL store (SVC_DATABASE_URL) or no Redis (SVC_REDIS_URL): env %v", cp.env)
	}
	if edge.kind != "Deployment" || edge.replicas < 2 || edge.env["SVC_EDGE_TOKEN"] == nil || edge.env["SVC_REDIS_URL"] == nil {
		t.Errorf("production edges: %s of %d replicas, env %v; want a Deployment of several with the edge token and Redis",
			edge.kind, edge.replicas, edge.env)
	}
	if try.kind != "StatefulSet" || try.replicas != 1 || try.env["SVC_DATABASE_URL"] != nil || !try.mounts[svcimage.DataDir] {
		t.Errorf("trying it: %s of %d replicas, env %v, mounts %v; want a StatefulSet of one on SQLite in a volume at %s",
			try.kind, try.replicas, try.env, try.mounts, svcimage.DataDir)
	}
}
