package benchkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// clockTick is the kernel's clock tick (USER_HZ): /proc/PID/stat counts
// CPU time in these. Linux fixes it at 100 for user space.
const clockTick = 100

// SelfCPU is the CPU time, user and system, that this process has used
// so far, in seconds.
func SelfCPU() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return tvSeconds(ru.Utime) + tvSeconds(ru.Stime), nil
}

// ReadCPU reads the CPU times used so far, in seconds: this process's
// (SelfCPU) and, unless pid is 0 (then server stays 0), the database
// server's, through server(pid), whose errors it prefixes with
// "server CPU: ".
func ReadCPU(pid int, server func(pid int) (float64, error)) (bench, srv float64, err error) {
	if bench, err = SelfCPU(); err != nil || pid == 0 {
		return bench, 0, err
	}
	if srv, err = server(pid); err != nil {
		return bench, 0, fmt.Errorf("server CPU: %w", err)
	}
	return bench, srv, nil
}

func tvSeconds(tv syscall.Timeval) float64 {
	return float64(tv.Sec) + float64(tv.Usec)/1e6
}

// ProcStat is what the benches read of /proc/PID/stat: the parent's PID
// and the CPU times, in seconds, of the process and of its children that
// have exited and been waited for.
type ProcStat struct {
	PPID                         int
	Utime, Stime, Cutime, Cstime float64
}

// ReadStat reads /proc/PID/stat; its errors name the file.
func ReadStat(pid int) (ProcStat, error) {
	var st ProcStat
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
	if st.PPID, err = strconv.Atoi(f[1]); err != nil {
		return st, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	for k, dst := range []*float64{&st.Utime, &st.Stime, &st.Cutime, &st.Cstime} {
		ticks, err := strconv.ParseFloat(f[11+k], 64)
		if err != nil {
			return st, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		*dst = ticks / clockTick
	}
	return st, nil
}
