package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// envDBRestartTest asks for TestDBRestart, which starts a PostgreSQL
// server of its own (so that restarting it disturbs no one else's
// tests) and so needs PostgreSQL's binaries and, run as root, the
// postgres user.
const envDBRestartTest = "OUTBOXSOAK_TEST_DB_RESTART"

// A database restart in the middle of a run, on a private PostgreSQL:
// nothing lost, every key in order.
func TestDBRestart(t *testing.T) {
	if os.Getenv(envDBRestartTest) == "" {
		t.Skipf("set %s=1 to run it: it starts a PostgreSQL server of its own (initdb, pg_ctl)", envDBRestartTest)
	}
	dsn, restart := privatePostgres(t)
	dir := filepath.Join(t.TempDir(), "report")
	var stdout, stderr bytes.Buffer
	code := realMain([]string{"run", "--driver", "postgres", "--dsn", dsn, "--rate", "100", "--duration", "30s", "--warmup", "4s",
		"--sample", "2s", "--drain", "2m", "--workers", "2", "--ordering", "--report", dir,
		"--faults", "db-restart@10s,kill-worker@20s", "--db-restart-cmd", restart}, &stdout, &stderr)
	t.Logf("stdout:\n%s", stdout.String())
	if code != exitOK {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	sum, err := readSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSummary(t, sum)
	checkFaults(t, sum)
	if f := sum.Faults[0]; f.Fault.Kind != dbRestart || !strings.Contains(f.Detail, "the database answered") {
		t.Errorf("the restart: %+v", f)
	}
}

// privatePostgres starts a PostgreSQL server in a directory of the
// test's, on a free port, and returns its DSN and the command that
// restarts it. The server is stopped when the test ends.
func privatePostgres(t *testing.T) (dsn, restart string) {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		t.Fatal("no /usr/lib/postgresql/*/bin/pg_ctl: install PostgreSQL's server binaries")
	}
	slices.Sort(bins)
	bin := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "outboxsoak-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	as := asPostgres(t, dir)
	port := freePort(t)
	data := filepath.Join(dir, "data")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", as+strings.Join(args, " "))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", args, err, out)
		}
	}
	run(bin+"/initdb", "-D", data, "-A", "trust", "-U", "postgres", ">/dev/null")
	opts := fmt.Sprintf(`"-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off"`, port, dir)
	run(bin+"/pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "server.log"), "-w", "start", ">/dev/null")
	t.Cleanup(func() {
		_ = exec.Command("sh", "-c", as+bin+"/pg_ctl -D "+data+" -m immediate -w stop").Run()
	})
	restart = as + bin + "/pg_ctl -D " + data + " -m fast -w restart -l " + filepath.Join(dir, "server.log")
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), restart
}

// asPostgres returns the prefix that runs a command as the user who owns
// the server's files: as root, the postgres user (initdb refuses root),
// who is given dir.
func asPostgres(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return ""
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root, and no postgres user to run the server as: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return "runuser -u postgres -- "
}

// freePort returns a loopback port no one listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
