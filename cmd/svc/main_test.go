package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// svcBin is the svc binary built from this package, so that the tests see what a user sees: the
// exit code of the process, its output, its answer to signals. It is stamped with testVersion the way
// the Makefile stamps a release.
var svcBin string

const testVersion = "v0.0.0-test-1-gabcdef0-dirty"

func TestMain(m *testing.M) {
	if addr := os.Getenv(fakeReplicaEnv); addr != "" {
		serveFakeReplica(addr) // this binary started again as a replica of a fleet (fleet_test.go)
		return
	}
	dir, err := os.MkdirTemp("", "svc-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	svcBin = filepath.Join(dir, "svc")
	out, err := exec.Command("go", "build", "-ldflags", "-X github.com/svcdev/svc/internal/version.stamped="+testVersion, "-o", svcBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build svc: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one finished svc process.
type result struct {
	code           int
	stdout, stderr string
}

// svcEnv is the environment of a user with an empty home: no credentials, no SVC_* variables
// other than those given.
func svcEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SVC_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(append(env, "HOME="+home), extra...)
}

// runSvc runs the binary in dir and waits for it.
func runSvc(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, svcBin, args...)
	cmd.Dir, cmd.Env = dir, env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("svc %q: %v", args, err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String()}
}

// lockedBuffer is the stdout of a running process, read while it writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// devProcess is a running `svc dev`.
type devProcess struct {
	cmd       *exec.Cmd
	stdout    *lockedBuffer
	stderr    *lockedBuffer
	apiBase   string // http://localhost:<port>, as printed
	studioURL string // http://127.0.0.1:<port>/, as printed
	done      chan error
}

var (
	apiLine    = regexp.MustCompile(`API:\s+(http://\S+)/v1`)
	studioLine = regexp.MustCompile(`studio: (http://127\.0\.0\.1:\d+/)`)
)

// startDev starts `svc dev` in dir on free ports and waits for it to print where it listens.
func startDev(t *testing.T, dir string, env []string, args ...string) *devProcess {
	t.Helper()
	cmd := exec.Command(svcBin, append([]string{"dev"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	p := &devProcess{cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := p.stdout.String()
		if m := studioLine.FindStringSubmatch(out); m != nil {
			p.studioURL = m[1]
			if m := apiLine.FindStringSubmatch(out); m != nil {
				p.apiBase = m[1]
			}
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("svc dev exited early (%v)\nstdout:\n%s\nstderr:\n%s", err, out, p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("svc dev printed no studio URL:\n%s\nstderr:\n%s", out, p.stderr.String())
		}
	}
}

// interrupt sends Ctrl-C and returns the exit code.
func (p *devProcess) interrupt(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("svc dev did not stop on SIGINT")
	}
	return p.cmd.ProcessState.ExitCode()
}

func TestExitCodes(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	env := svcEnv(home)

	// --help is an answer, not an error, for every command.
	for _, args := range [][]string{
		{"--help"}, {"dev", "--help"}, {"server", "--help"}, {"studio", "--help"}, {"keys", "--help"},
		{"deployments", "get", "--help"}, {"login", "--help"}, {"users", "add", "--help"},
		{"edge", "--help"}, {"edge-tokens", "create", "--help"}, {"edge-tokens", "--help"},
	} {
		r := runSvc(t, dir, env, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "Usage") {
			t.Errorf("svc %s: exit %d, want 0 with the usage on stdout\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if r := runSvc(t, dir, env, "--help"); !strings.Contains(r.stdout, "Exit codes") {
		t.Errorf("svc --help does not document the exit codes:\n%s", r.stdout)
	}

	// Mistakes on the command line exit 2 and say so first, in one line, with a second line naming the
	// --help that shows the usage (not the usage itself).
	for _, c := range []struct {
		args       []string
		err, usage string
	}{
		{[]string{"bogus"}, `error: unknown command "bogus"`, "svc --help"},
		{[]string{"deployments", "get"}, "error: missing arguments: svc deployments get DEPLOYMENT", "svc deployments get --help"},
		{[]string{"deployments", "list", "--bogus"}, "error: flag provided but not defined: --bogus", "svc deployments list --help"},
		{[]string{"dev", "--nope"}, "error: flag provided but not defined: --nope", "svc dev --help"},
		{[]string{"server", "extra"}, `error: unexpected argument "extra"`, "svc server --help"},
		{[]string{"keys", "issue", "dep_1"}, "error: --label is required", "svc keys issue --help"},
		{[]string{"edge"}, "error: --control-plane is required", "svc edge --help"},
	} {
		r := runSvc(t, dir, env, c.args...)
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != 2 || r.stdout != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], c.err) || lines[1] != "run '"+c.usage+"' for usage" {
			t.Errorf("svc %s: exit %d, want 2 with the error and a hint at %s\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), r.code, c.usage, r.stdout, r.stderr)
		}
	}

	// A server that is not there: exit 1, in a sentence naming it.
	if r := runSvc(t, dir, env, "deployments", "create", "--slug", "x", "--target", "base:m", "--api", "http://127.0.0.1:1"); r.code != 1 ||
		r.stderr != "error: Cannot reach the svc server at http://127.0.0.1:1. Is the server running? (svc dev starts one; --api or SVC_API names another.)\n" {
		t.Errorf("server down: exit %d\n%s", r.code, r.stderr)
	}

	// A bad value of an operating flag is a usage error too, naming the flag, for every process.
	for _, args := range [][]string{
		{"server", "--log-level", "loud"}, {"dev", "--log-format", "xml"}, {"server", "--trusted-proxies", "not-an-address"}, {"server", "--spool-max-mb", "0"},
		{"edge", "--control-plane", "http://127.0.0.1:1", "--log-level", "loud"},
	} {
		r := runSvc(t, dir, env, args...)
		if r.code != 2 || !strings.Contains(r.stderr, args[len(args)-2]) {
			t.Errorf("svc %s: exit %d, want 2 naming %s\nstderr:\n%s", strings.Join(args, " "), r.code, args[len(args)-2], r.stderr)
		}
	}

	// What the service refuses exits 1 with its message.
	dev := startDev(t, dir, env, "--addr", "127.0.0.1:0", "--data", filepath.Join(home, "data"))
	api := "--api=" + dev.apiBase
	if r := runSvc(t, dir, env, "login", "--anonymous", api); r.code != 0 {
		t.Fatalf("login: exit %d\n%s", r.code, r.stderr)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"deployments", "create", "--slug", "www", "--target", "base:sim-llama-3.1-8b-instruct", api}, "reserved_slug"},
		{[]string{"deployments", "get", "no-such-endpoint", api}, "not_found"},
	} {
		r := runSvc(t, dir, env, c.args...)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("svc %s: exit %d, want 1 naming %s\nstderr:\n%s", strings.Join(c.args, " "), r.code, c.want, r.stderr)
		}
	}
}

// Each flag of `svc dev --help` states its default once.
func TestDevHelpStatesEachDefaultOnce(t *testing.T) {
	r := runSvc(t, t.TempDir(), svcEnv(t.TempDir()), "dev", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "-studio-addr") {
		t.Fatalf("svc dev --help: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// PrintDefaults writes "  -name type" then the indented usage line, which ends with its
	// "(default …)" when the flag package adds one.
	word := regexp.MustCompile(`(?i)\bdefault\b`)
	for _, line := range strings.Split(r.stdout, "\n") {
		if n := len(word.FindAllString(line, -1)); n > 1 {
			t.Errorf("a default said twice: %q", strings.TrimSpace(line))
		}
	}
}

// SVC_API is how the CLI commands find the API (their help says so). Set in the shell, it must not
// turn `svc dev` into a studio without its embedded server; and Ctrl-C ends `svc dev` with exit
// code 0, so that `make run` does not end with an error.
func TestDevIgnoresSVCAPIAndStopsCleanlyOnCtrlC(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	dev := startDev(t, dir, svcEnv(home, "SVC_API=http://127.0.0.1:1"),
		"--addr", "127.0.0.1:0", "--data", filepath.Join(home, "data"))
	if !strings.Contains(dev.stdout.String(), "embedded server on 127.0.0.1:") || dev.apiBase == "" {
		t.Fatalf("svc dev started no embedded server:\n%s", dev.stdout.String())
	}
	// The embedded server answers on the address given, not the API named by SVC_API.
	resp, err := http.Get(dev.apiBase + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET %s/v1/models: %d", dev.apiBase, resp.StatusCode)
	}
	if code := dev.interrupt(t); code != 0 {
		t.Fatalf("svc dev exited %d on Ctrl-C, want 0\nstderr:\n%s", code, dev.stderr.String())
	}

	// --api together with a flag of the embedded server is a mistake, not something to ignore.
	r := runSvc(t, dir, svcEnv(home), "dev", "--api", "http://127.0.0.1:1", "--addr", "127.0.0.1:0")
	if r.code != 2 || !strings.Contains(r.stderr, "--addr") {
		t.Fatalf("svc dev --api --addr: exit %d\n%s", r.code, r.stderr)
	}
}

// `svc --version` and `svc version` print the version the build stamped, and nothing else, on stdout.
func TestVersion(t *testing.T) {
	home := t.TempDir()
	for _, arg := range []string{"--version", "version"} {
		r := runSvc(t, home, svcEnv(home), arg)
		if r.code != 0 || r.stdout != "svc "+testVersion+"\n" || r.stderr != "" {
			t.Errorf("svc %s: exit %d, stdout %q, stderr %q; want exit 0 and %q", arg, r.code, r.stdout, r.stderr, "svc "+testVersion+"\n")
		}
	}
}
