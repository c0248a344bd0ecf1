// Package redistest starts a real redis-server for tests: on a free loopback port, in a throw-away
// folder, persisting nothing, stopped when the test ends.
package redistest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// Server is a running redis-server.
type Server struct {
	Addr string // 127.0.0.1:<port>
	URL  string // redis://127.0.0.1:<port>/0
	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts redis-server, or skips the test when it is not installed (make test-deps installs
// it). With SVC_TEST_DEPS=required a missing server fails the test instead.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("SVC_TEST_DEPS") == "required" {
			t.Fatal("redis-server is not installed: run make test-deps")
		}
		t.Skip("redis-server is not installed: run make test-deps (Debian's redis-server) to run this test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", "")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	s.URL = "redis://" + s.Addr + "/0"
	go func() {
		cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(s.Stop)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", s.Addr); err == nil {
			c.Close()
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("redis-server exited at start")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s", s.Addr)
		}
	}
}

// Stop kills the server and waits for it to be gone (idempotent).
func (s *Server) Stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}
