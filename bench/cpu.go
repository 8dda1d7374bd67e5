package main

import (
	"fmt"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
)

// cpuTimes is CPU time used so far, in seconds: the server process's
// (when the bench knows its PID, see -server-pid) and the bench
// process's own (where the relay, Watermill and the ceiling's Go side
// all run).
type cpuTimes struct {
	server, bench float64
}

// readCPU reads the CPU times; server stays 0 when serverPID is 0.
func readCPU(serverPID int) (cpuTimes, error) {
	var c cpuTimes
	var err error
	if c.bench, err = benchkit.SelfCPU(); err != nil {
		return c, err
	}
	if serverPID == 0 {
		return c, nil
	}
	st, err := benchkit.ReadStat(serverPID)
	if err != nil {
		return c, fmt.Errorf("server CPU: %w", err)
	}
	c.server = st.Utime + st.Stime
	return c, nil
}
