//go:build linux

package main

import (
	"os/exec"
	"syscall"
)

// orphanGuard has Linux kill the child if the bench dies without stopping it (killed, crashed), so that
// no server outlives a bench. The bench's own helpers also exit when their stdin closes (exitWithBench).
func orphanGuard(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
