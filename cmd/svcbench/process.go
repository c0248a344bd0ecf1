package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// child is a process started by the bench.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser // closing it ends the bench's own helpers (exitWithBench)
	url   string
}

// start runs a command whose first line of output is its URL (or waits for ready when given).
func start(name string, args []string, ready string, stderr io.Writer) (*child, error) {
	return startWith(name, args, nil, ready, stderr)
}

// startWith is start with more environment variables for the command.
func startWith(name string, args, env []string, ready string, stderr io.Writer) (*child, error) {
	cmd := exec.Command(name, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stderr = stderr
	orphanGuard(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: in}
	if ready != "" {
		go io.Copy(io.Discard, out)
		c.url = ready
		deadline := time.Now().Add(20 * time.Second)
		for {
			resp, err := http.Get(ready + "/")
			if err == nil {
				resp.Body.Close()
				return c, nil
			}
			if time.Now().After(deadline) {
				c.stop()
				return nil, fmt.Errorf("%s did not start: %v", name, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	go io.Copy(io.Discard, out)
	c.url = strings.TrimSpace(line)
	return c, nil
}

func (c *child) stop() {
	c.stdin.Close()
	c.cmd.Process.Kill()
	c.cmd.Wait()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startEdgeProcess makes an edge token on the server's data folder (`svc edge-tokens create`, as an
// operator would on the control-plane host) and starts `svc edge` in front of the server with it.
func startEdgeProcess(ctx context.Context, svcBin, tmp, base, models string, logFile io.Writer, name string, extra ...string) (*child, error) {
	create := exec.CommandContext(ctx, svcBin, "edge-tokens", "create", name, "--data", filepath.Join(tmp, "data"))
	create.Stderr = logFile
	out, err := create.Output()
	if err != nil {
		return nil, fmt.Errorf("svc edge-tokens create: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	cmd := []string{"edge", "--control-plane", base, "--addr", fmt.Sprintf("127.0.0.1:%d", port),
		"--endpoint-domain", fmt.Sprintf("localhost:%d", port), "--models", models,
		"--spool-dir", filepath.Join(tmp, fmt.Sprintf("spool-%d", port))}
	cmd = append(cmd, extra...)
	// The token goes in the environment, never on the command line.
	env := []string{"SVC_BENCH_EDGE_TOKEN=" + strings.TrimSpace(string(out))}
	edge, err := startWith(svcBin, append(cmd, "--edge-token-env", "SVC_BENCH_EDGE_TOKEN"), env, url, logFile)
	if err != nil {
		return nil, err
	}
	// Ready once synced with the server (its change feed said hello).
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := opsClient.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return edge, nil
			}
		}
		if time.Now().After(deadline) {
			edge.stop()
			return nil, fmt.Errorf("svc edge did not sync with the server")
		}
	}
}
