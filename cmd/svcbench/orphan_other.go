//go:build !linux

package main

import "os/exec"

// orphanGuard does nothing here: only Linux can tie a child's life to its parent's. The bench's own
// helpers still exit when their stdin closes (exitWithBench); a killed bench may leave `svc server` running.
func orphanGuard(cmd *exec.Cmd) {}
