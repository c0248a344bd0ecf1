package main

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"time"
)

// startRedis starts a throw-away redis-server (no persistence) for the "Redis limits" row; its url is
// redis://127.0.0.1:<port>/0. An error when redis-server is not installed: the row is skipped.
func startRedis(tmp string) (*child, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp)
	orphanGuard(cmd)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, stdin: in, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			conn.Close()
			return c, nil
		}
		if time.Now().After(deadline) {
			c.stop()
			return nil, errors.New("redis-server did not listen")
		}
	}
}
