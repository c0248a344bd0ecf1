//go:build linux

package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on every Linux Go runs on).
const clockTick = 10 * time.Millisecond

// CPUTime returns the CPU time, user and system, that a process and all its threads have used so far.
func CPUTime(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: fields are counted after its end.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of proc(5)
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * clockTick, true
}

// MachineCPU returns the time all the machine's CPUs have been busy so far and the time they have
// existed (busy and idle), summed over CPUs, from /proc/stat: their ratio over an interval is how
// busy the machine was, whatever ran on it.
func MachineCPU() (busy, total time.Duration, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, false
	}
	var ticks [10]int64
	for i := 1; i < len(f) && i <= len(ticks); i++ {
		if ticks[i-1], err = strconv.ParseInt(f[i], 10, 64); err != nil {
			return 0, 0, false
		}
	}
	// user nice system idle iowait irq softirq steal guest guest_nice: guest time is counted in user
	// and nice already; idle and iowait are not busy.
	var sum int64
	for _, t := range ticks[:8] {
		sum += t
	}
	idle := ticks[3] + ticks[4]
	return time.Duration(sum-idle) * clockTick, time.Duration(sum) * clockTick, true
}
