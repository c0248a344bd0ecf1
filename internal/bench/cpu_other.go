//go:build !linux

package bench

import "time"

// CPUTime is not measured here: only Linux lets the bench read another process's CPU time cheaply.
func CPUTime(pid int) (time.Duration, bool) { return 0, false }

// MachineCPU is not measured here (Linux's /proc/stat only).
func MachineCPU() (busy, total time.Duration, ok bool) { return 0, 0, false }
