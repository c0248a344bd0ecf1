package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every flag that docs/DEPLOY.md's manifests pass to `svc server` and `svc edge` is one that command
// takes (a misspelt flag is a pod in CrashLoopBackOff).
func TestDeployManifestFlagsExist(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "DEPLOY.md"))
	if err != nil {
		t.Fatal(err)
	}
	// args: ["server", "--addr", …] in the yaml blocks, possibly over several lines; JSON arrays as written.
	argLists := regexp.MustCompile(`(?s)\bargs: (\[[^\]]*\])`).FindAllSubmatch(raw, -1)
	home := t.TempDir()
	help := map[string]string{}
	checked := 0
	for _, m := range argLists {
		var args []string
		if err := json.Unmarshal(m[1], &args); err != nil {
			t.Fatalf("DEPLOY.md: args %s: %v", m[1], err)
		}
		if len(args) == 0 || (args[0] != "server" && args[0] != "edge") {
			continue // not svc (vLLM's)
		}
		if _, ok := help[args[0]]; !ok {
			r := runSvc(t, home, svcEnv(home), args[0], "--help")
			help[args[0]] = r.stdout
		}
		for _, a := range args[1:] {
			if !strings.HasPrefix(a, "--") {
				continue
			}
			checked++
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.Contains(help[args[0]], "\n  -"+name+" ") && !strings.Contains(help[args[0]], "\n  -"+name+"\n") {
				t.Errorf("DEPLOY.md passes %s to svc %s, which has no such flag", a, args[0])
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d flags of DEPLOY.md's manifests; did their layout change?", checked)
	}
}
