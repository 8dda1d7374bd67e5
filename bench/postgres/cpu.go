package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
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

// clockTick is the kernel's clock tick (USER_HZ): /proc/PID/stat counts
// CPU time in these. Linux fixes it at 100 for user space.
const clockTick = 100

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
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return c, err
	}
	c.bench = float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6 + float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6
	if postmaster == 0 {
		return c, nil
	}
	for range 20 {
		own, err := readStat(postmaster)
		if err != nil {
			return c, fmt.Errorf("server CPU: %w", err)
		}
		children, err := childrenCPU(postmaster)
		if err != nil {
			return c, fmt.Errorf("server CPU: %w", err)
		}
		again, err := readStat(postmaster)
		if err != nil {
			return c, fmt.Errorf("server CPU: %w", err)
		}
		if again.cutime == own.cutime && again.cstime == own.cstime {
			c.server, c.measured = own.utime+own.stime+own.cutime+own.cstime+children, true
			return c, nil
		}
	}
	return c, fmt.Errorf("server CPU: the postmaster %d reaped children during each of 20 scans of /proc", postmaster)
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
		st, err := readStat(pid)
		if err != nil || st.ppid != postmaster {
			continue // gone meanwhile, or not the server's
		}
		sum += st.utime + st.stime + st.cutime + st.cstime
	}
	return sum, nil
}

// procStat is what the bench reads of /proc/PID/stat: the parent's PID
// and the CPU times, in seconds, of the process and of its children that
// have exited and been waited for.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime float64
}

func readStat(pid int) (procStat, error) {
	var st procStat
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count the fields after its closing parenthesis.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return st, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return st, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	// Field 3 of the line (the state) is f[0]; ppid is field 4, utime,
	// stime, cutime and cstime are fields 14 to 17.
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return st, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	for k, dst := range []*float64{&st.utime, &st.stime, &st.cutime, &st.cstime} {
		ticks, err := strconv.ParseFloat(f[11+k], 64)
		if err != nil {
			return st, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		*dst = ticks / clockTick
	}
	return st, nil
}
