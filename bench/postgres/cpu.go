package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
)

// cpuTimes is CPU time used so far, in seconds: the server's (when the
// bench knows the postmaster's PID, see -server-pid) and the bench
// process's own (where the relay, River, Watermill and the ceiling's Go
// side all run).
type cpuTimes struct {
	server, bench float64
	// measured says that server was read: -server-pid was given.
	measured bool
}

// readCPU reads the CPU times; server stays 0 when postmaster is 0.
//
// PostgreSQL runs every backend and background process as a child of
// the postmaster, so the server's CPU time is the postmaster's own, plus
// that of every live child (each /proc/PID/stat whose parent is the
// postmaster), plus the children's that have exited and been waited for
// (the postmaster's cutime and cstime). A backend that exits between two
// readings leaves the sum of live children and enters the postmaster's
// cutime and cstime once the postmaster has reaped it: the difference of
// two readings keeps its CPU time. A child reaped while the children are
// being scanned would be counted twice or not at all, so the scan is
// taken again until the postmaster's cutime and cstime are the same
// before and after it.
func readCPU(postmaster int) (cpuTimes, error) {
	var c cpuTimes
	var err error
	c.bench, c.server, err = benchkit.ReadCPU(postmaster, serverCPU)
	c.measured = postmaster != 0 && err == nil
	return c, err
}

// serverCPU is the CPU time of the postmaster and its children (see
// readCPU).
func serverCPU(postmaster int) (float64, error) {
	for range 20 {
		own, err := benchkit.ReadStat(postmaster)
		if err != nil {
			return 0, err
		}
		children, err := childrenCPU(postmaster)
		if err != nil {
			return 0, err
		}
		again, err := benchkit.ReadStat(postmaster)
		if err != nil {
			return 0, err
		}
		if again.Cutime == own.Cutime && again.Cstime == own.Cstime {
			return own.Utime + own.Stime + own.Cutime + own.Cstime + children, nil
		}
	}
	return 0, fmt.Errorf("the postmaster %d reaped children during each of 20 scans of /proc", postmaster)
}

// childrenCPU is the CPU time of the live children of the postmaster,
// theirs and their own waited-for children's.
func childrenCPU(postmaster int) (float64, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == postmaster {
			continue // not a process
		}
		st, err := benchkit.ReadStat(pid)
		if err != nil || st.PPID != postmaster {
			continue // gone meanwhile, or not the server's
		}
		sum += st.Utime + st.Stime + st.Cutime + st.Cstime
	}
	return sum, nil
}
