package main

import (
	"bytes"
	"context"
	"database/sql"
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
	"time"
)

// envFaultRunTest asks for TestFaultRun, which starts a server of each
// database of its own (so that restarting it disturbs no one else's
// tests) and so needs PostgreSQL's and MariaDB's (or MySQL's) server
// binaries and, run as root, the postgres and mysql users. CI sets it.
const envFaultRunTest = "OUTBOXSOAK_TEST_FAULT_RUN"

// faultRunFaults are one of every fault kind, in a 2-minute run.
const faultRunFaults = "kill-worker@10s,kill-conns@20s,db-restart@30s,sink-503@45s+8s,sink-down@60s+8s,sink-slow@75s+8s,net-stall@90s+8s"

// The soak as CI runs it: 2 minutes on each database, on a private
// server, with every fault once, the database's restart included:
// nothing lost, every key in order, every fault happened, every
// duplicate blamed on one.
func TestFaultRun(t *testing.T) {
	if os.Getenv(envFaultRunTest) == "" {
		t.Skipf("set %s=1 to run it: it starts a PostgreSQL and a MariaDB server of its own", envFaultRunTest)
	}
	for _, driver := range []string{"mysql", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			var dsn, restart string
			if driver == "postgres" {
				dsn, restart = privatePostgres(t)
			} else {
				dsn, restart = privateMariaDB(t)
			}
			dir := filepath.Join(t.TempDir(), "report")
			var stdout, stderr bytes.Buffer
			code := realMain([]string{"run", "--driver", driver, "--dsn", dsn, "--rate", "100", "--duration", "2m", "--warmup", "5s",
				"--sample", "2s", "--drain", "2m", "--workers", "2", "--ordering", "--report", dir,
				"--faults", faultRunFaults, "--seed", "1", "--db-restart-cmd", restart}, &stdout, &stderr)
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
			kinds := map[faultKind]bool{}
			for _, f := range sum.Faults {
				kinds[f.Fault.Kind] = true
				if f.Fault.Kind == dbRestart && !strings.Contains(f.Detail, "the database answered") {
					t.Errorf("the restart: %+v", f)
				}
			}
			for _, k := range faultKinds {
				if !kinds[k.kind] {
					t.Errorf("no %s fault happened", k.kind)
				}
			}
		})
	}
}

// privateMariaDB starts a MariaDB (or MySQL) server in a directory of the
// test's, on a free port, and returns its DSN and the command that
// restarts it. The server is stopped when the test ends.
func privateMariaDB(t *testing.T) (dsn, restart string) {
	t.Helper()
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		t.Fatal("no mariadb-install-db: install MariaDB's server (mariadb-server)")
	}
	server := "/usr/sbin/mariadbd"
	if _, err := os.Stat(server); err != nil {
		t.Fatalf("no %s: install MariaDB's server (mariadb-server)", server)
	}
	dir, err := os.MkdirTemp("", "outboxsoak-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	owner := ""
	if os.Geteuid() == 0 {
		chownTo(t, dir, "mysql")
		owner = " --user=mysql"
	}
	data, pid := filepath.Join(dir, "data"), filepath.Join(dir, "server.pid")
	if out, err := exec.Command("sh", "-c", install+" --no-defaults --datadir="+data+owner+
		" --auth-root-authentication-method=normal --skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := freePort(t)
	start := fmt.Sprintf("setsid %s --no-defaults --datadir=%s --socket=%s --port=%d --bind-address=127.0.0.1 --pid-file=%s%s"+
		" --innodb-buffer-pool-size=128M --skip-log-bin >>%s 2>&1 </dev/null &",
		server, data, filepath.Join(dir, "server.sock"), port, pid, owner, filepath.Join(dir, "server.log"))
	stop := "p=$(cat " + pid + ") && kill $p && while kill -0 $p 2>/dev/null; do sleep 0.1; done"
	if out, err := exec.Command("sh", "-c", start).CombinedOutput(); err != nil {
		t.Fatalf("starting mariadbd: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("sh", "-c", stop).Run() })
	dsn = fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port)
	waitForMariaDB(t, dsn, filepath.Join(dir, "server.log"))
	return dsn, stop + "; " + start
}

// waitForMariaDB waits until the server at dsn answers, for up to a
// minute.
func waitForMariaDB(t *testing.T, dsn, log string) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log)
			t.Fatalf("the private MariaDB did not answer within a minute: %v\n%s", err, out)
		}
		time.Sleep(100 * time.Millisecond)
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
	chownTo(t, dir, "postgres")
	return "runuser -u postgres -- "
}

// chownTo gives dir to the user name (the server runs as it).
func chownTo(t *testing.T, dir, name string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("running as root, and no %s user to run the server as: %v", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
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
