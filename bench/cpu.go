package main

import "github.com/outboxrelay/outboxrelay/bench/internal/benchkit"

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
	c.bench, c.server, err = benchkit.ReadCPU(serverPID, func(pid int) (float64, error) {
		st, err := benchkit.ReadStat(pid)
		return st.Utime + st.Stime, err
	})
	return c, err
}
