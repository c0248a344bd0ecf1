package main

import (
	"os/exec"
	"strings"
	"testing"
)

// `make run` says what it is doing before the long silent part of a first build (the modules'
// download and compile), and before it starts the studio.
func TestMakeRunSaysWhatItDoes(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.Command("make", "-n", "run")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	step := func(prefix string) int {
		for i, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return i
			}
		}
		t.Fatalf("make run has no step %q:\n%s", prefix, out)
		return -1
	}
	says, builds := step(`echo "==> building bin/svc`), step("CGO_ENABLED=0 go build")
	starts, runs := step(`echo "==> starting the studio`), step("bin/svc dev")
	if says > builds || starts > runs || builds > runs {
		t.Fatalf("make run does not say what it does before doing it:\n%s", out)
	}
	if !strings.Contains(lines[says], "downloads and compiles the Go modules") {
		t.Errorf("the build step does not say why a first build takes long: %s", lines[says])
	}
}
