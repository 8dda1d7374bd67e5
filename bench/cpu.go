package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// cpuTimes is CPU time used so far, in seconds: the server process's
// (when the bench knows its PID, see -server-pid) and the bench
// process's own (where the relay, Watermill and the ceiling's Go side
// all run).
type cpuTimes struct {
	server, bench float64
}

// clockTick is the kernel's clock tick (USER_HZ): /proc/PID/stat counts
// CPU time in these. Linux fixes it at 100 for user space.
const clockTick = 100

// readCPU reads the CPU times; server stays 0 when serverPID is 0.
func readCPU(serverPID int) (cpuTimes, error) {
	var c cpuTimes
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return c, err
	}
	c.bench = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
	if serverPID == 0 {
		return c, nil
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", serverPID))
	if err != nil {
		return c, fmt.Errorf("server CPU: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count the fields after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return c, fmt.Errorf("server CPU: /proc/%d/stat: no command name", serverPID)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return c, fmt.Errorf("server CPU: /proc/%d/stat: %d fields", serverPID, len(f))
	}
	// utime and stime are fields 14 and 15 of the line, 12 and 13 after
	// the command name (field 3, the state, is f[0]).
	for _, field := range f[11:13] {
		ticks, err := strconv.ParseFloat(field, 64)
		if err != nil {
			return c, fmt.Errorf("server CPU: /proc/%d/stat: %w", serverPID, err)
		}
		c.server += ticks / clockTick
	}
	return c, nil
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}
