package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// servers are the real servers the run tests use, from the environment
// the repository's other tests read.
var servers = []struct{ driver, env, example string }{
	{"mysql", "OUTBOXRELAY_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"},
	{"postgres", "OUTBOXRELAY_TEST_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"},
}

// serverDSN returns the DSN of driver's test server, failing the test
// when there is none: the soak is only worth running against a real one.
func serverDSN(t *testing.T, driver string) string {
	t.Helper()
	for _, s := range servers {
		if s.driver == driver {
			if dsn := os.Getenv(s.env); dsn != "" {
				return dsn
			}
			t.Fatalf("set %s to a %s server's DSN, such as %s: the soak runs against a real server", s.env, driver, s.example)
		}
	}
	t.Fatalf("no server for %s", driver)
	return ""
}

// shortRunFaults are one of each fault but a database restart (see
// TestFaultRun, which restarts private servers), in a 36s run on the
// servers the other tests share.
const shortRunFaults = "kill-worker@8s,kill-conns@12s,sink-503@16s+3s,sink-down@21s+3s,sink-slow@26s+3s,net-stall@31s+4s"

// A short soak on each server, without faults and with them: it must
// pass (nothing lost, every key in order), write a report that parses,
// and drop its scratch database.
func TestShortRun(t *testing.T) {
	for _, s := range servers {
		for _, faults := range []string{"", shortRunFaults} {
			name, duration := s.driver, "20s"
			if faults != "" {
				name, duration = s.driver+"/faults", "36s"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				dsn := serverDSN(t, s.driver)
				dir := filepath.Join(t.TempDir(), "report")
				args := []string{"run", "--driver", s.driver, "--dsn", dsn, "--rate", "100", "--duration", duration,
					"--warmup", "4s", "--sample", "2s", "--drain", "90s", "--workers", "2", "--ordering", "--report", dir}
				if faults != "" {
					args = append(args, "--faults", faults, "--seed", "1")
				}
				var stdout, stderr bytes.Buffer
				code := realMain(args, &stdout, &stderr)
				t.Logf("stdout:\n%s", stdout.String())
				if code != exitOK {
					t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitOK, stderr.String())
				}
				sum, err := readSummary(dir)
				if err != nil {
					t.Fatal(err)
				}
				checkSummary(t, sum)
				checkFaults(t, sum)
				checkReportFiles(t, dir)
				checkDropped(t, s.driver, dsn, sum.Config.Target)
			})
		}
	}
}

// checkFaults checks that every fault of the schedule happened, and that
// every duplicate is blamed on one.
func checkFaults(t *testing.T, sum *summary) {
	t.Helper()
	if len(sum.Faults) != len(sum.Config.Faults) {
		t.Fatalf("%d faults happened of %d", len(sum.Faults), len(sum.Config.Faults))
	}
	for _, f := range sum.Faults {
		if f.Error != "" || f.Detail == "" {
			t.Errorf("%s: %q, error %q", f.Label, f.Detail, f.Error)
		}
		if f.Fault.Kind == killConns && strings.Contains(f.Detail, "ended 0 ") {
			t.Errorf("%s: %s", f.Label, f.Detail)
		}
		if f.Fault.For > 0 && f.EndS-f.StartS < f.Fault.For.Seconds()*0.9 {
			t.Errorf("%s lasted %.1fs of %v", f.Label, f.EndS-f.StartS, f.Fault.For)
		}
	}
	if kills := strings.Count(sum.Config.FaultSpec, string(killWorker)); sum.Totals.WorkerProcesses != sum.Config.Workers+kills {
		t.Errorf("%d worker processes started, want %d and one per kill", sum.Totals.WorkerProcesses, sum.Config.Workers)
	}
	for name, v := range sum.Consumers {
		var blamed int64
		for cause, n := range v.DuplicateCauses {
			blamed += n
			if len(sum.Faults) == 0 && cause != noCause {
				t.Errorf("%s: %d duplicates blamed on %s in a run without faults", name, n, cause)
			}
		}
		if blamed != v.Duplicates {
			t.Errorf("%s: %d duplicates, %d blamed", name, v.Duplicates, blamed)
		}
	}
}

func checkSummary(t *testing.T, sum *summary) {
	t.Helper()
	if !sum.Pass || len(sum.Failures) > 0 {
		t.Errorf("the run failed: %v", sum.Failures)
	}
	// How many events the writers commit in the run's time depends on
	// the machine's load (35 in 20 s on a two-core machine at load 30,
	// 2,000 when it is quiet): only none is a failure.
	if sum.Totals.Events == 0 {
		t.Error("no event committed")
	}
	for _, name := range []string{defaultConsumer, DefaultConsumer} {
		v := sum.Consumers[name]
		if v == nil {
			t.Fatalf("no verdict for consumer %s", name)
		}
		if v.Committed != sum.Totals.Events || v.Lost != 0 || v.OrderViolations != 0 || v.Unique != v.Committed {
			t.Errorf("%s: committed %d of %d, delivered %d, lost %d, order violations %d %q", name, v.Committed, sum.Totals.Events, v.Unique, v.Lost, v.OrderViolations, v.OrderSample)
		}
		if v.Lag.All.Count != uint64(v.Unique) || v.Lag.All.P99Ms <= 0 {
			t.Errorf("%s: lag %+v for %d deliveries", name, v.Lag.All, v.Unique)
		}
	}
	if len(sum.Samples) < 5 {
		t.Fatalf("%d samples, want a sample every 2s of a 20s run", len(sum.Samples))
	}
	last := sum.Samples[len(sum.Samples)-1]
	if len(last.Workers) != 2 || last.Server == nil || last.ClientConns == 0 {
		t.Errorf("the last sample lacks figures: %d workers, server %v, client connections %d", len(last.Workers), last.Server, last.ClientConns)
	}
	for _, w := range last.Workers {
		if w.RSSBytes == 0 || w.HeapBytes == 0 || w.Goroutines == 0 {
			t.Errorf("worker %d reported %+v", w.Slot, w.workerStatus)
		}
	}
}

// checkReportFiles checks that report.md names every plot it shows, and
// that each is a well-formed SVG.
func checkReportFiles(t *testing.T, dir string) {
	t.Helper()
	md, err := os.ReadFile(filepath.Join(dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	plots, err := filepath.Glob(filepath.Join(dir, plotsDir, "*.svg"))
	if err != nil || len(plots) < 9 {
		t.Fatalf("%d plots (%v), want at least 9", len(plots), err)
	}
	for _, p := range plots {
		if !bytes.Contains(md, []byte(plotsDir+"/"+filepath.Base(p))) {
			t.Errorf("report.md does not show %s", filepath.Base(p))
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			XMLName xml.Name
		}
		if err := xml.Unmarshal(b, &doc); err != nil || doc.XMLName.Local != "svg" {
			t.Errorf("%s is not an SVG: %v", p, err)
		}
	}
}

// checkDropped checks that the run's scratch database is gone.
func checkDropped(t *testing.T, driver, dsn, target string) {
	t.Helper()
	name := target[strings.LastIndex(target, "/")+1:]
	if !strings.HasPrefix(name, "outboxsoak_") {
		t.Fatalf("the run's database %q is not a scratch database", name)
	}
	d, err := newDialect(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db, err := d.open("", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := map[string]string{
		"mysql":    "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?",
		"postgres": "SELECT count(*) FROM pg_database WHERE datname = $1",
	}[driver]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	if err := db.QueryRowContext(ctx, q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the scratch database %s is still there", name)
	}
}

// The report can be drawn again from summary.json alone, in the other
// format.
func TestReportRedraw(t *testing.T) {
	dir := t.TempDir()
	sum := fakeSummary()
	if err := writeReport(dir, sum); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := realMain([]string{"report", "--plot-format", "png", dir}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	for _, f := range []string{"throughput.png", "lag.png", "backlog.png", "rss.png", "tables.png"} {
		if _, err := os.Stat(filepath.Join(dir, plotsDir, f)); err != nil {
			t.Error(err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, reportFile))
	if !bytes.Contains(md, []byte("plots/lag.png")) {
		t.Errorf("report.md does not show the PNGs:\n%s", md)
	}
}

// fakeSummary is a summary of a run that never happened, with a sample
// a second for a minute.
func fakeSummary() *summary {
	cfg := &config{Driver: "postgres", Target: "db:5432/x", Duration: time.Minute, Warmup: 10 * time.Second, Drain: time.Minute,
		SampleEvery: time.Second, Workers: 2, Consumer: "activity", Rooms: 10, Rate: 50, Writers: 4, EventsPerTx: 1, PlotFormat: "svg"}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sum := &summary{Program: "outboxsoak", Config: cfg, Server: "PostgreSQL 15", Started: start,
		WritingEnded: start.Add(time.Minute), Drained: start.Add(61 * time.Second), Ended: start.Add(62 * time.Second),
		Consumers: map[string]*consumerSummary{}, Pass: true}
	for i := range 62 {
		s := sample{T: float64(i), Phase: "steady", EnqueuePerS: 50, Consumers: map[string]consumerSample{},
			Server: &serverFigures{Connections: 9, Tables: map[string]tableFigures{"soak_outbox": {DataBytes: int64(i) << 16, DeadTuples: int64(i)}}, HistoryLength: -1}}
		for _, c := range cfg.consumers() {
			s.Consumers[c] = consumerSample{DeliveredPerS: 50, Lag: lagFigures{Count: 50, P50Ms: 4, P99Ms: 20 + float64(i), MaxMs: 30}, Pending: i % 7}
		}
		for w := range 2 {
			s.Workers = append(s.Workers, workerSample{workerStatus: workerStatus{Slot: w, PID: 100 + w, RSSBytes: 20 << 20, HeapBytes: 5 << 20, Goroutines: 30, DBOpen: 2}})
		}
		sum.Samples = append(sum.Samples, s)
	}
	for _, c := range cfg.consumers() {
		sum.Consumers[c] = &consumerSummary{verdict: verdict{Committed: 3000, Unique: 3000, Deliveries: 3000}}
	}
	return sum
}

// --use-dsn-database writes into the DSN's database, leaves its tables
// there, and refuses to run again over them.
func TestUseDSNDatabase(t *testing.T) {
	dsn := serverDSN(t, "mysql")
	d, err := newDialect("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := d.open("", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() }) // after the drop below: cleanups run last first
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := fmt.Sprintf("outboxsoak_test_%d", time.Now().UnixNano())
	if err := d.createDatabase(ctx, admin, name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.dropDatabase(context.Background(), admin, name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = name
	args := func(report string) []string {
		return []string{"run", "--driver", "mysql", "--dsn", cfg.FormatDSN(), "--use-dsn-database", "--rate", "50", "--duration", "3s",
			"--warmup", "1s", "--sample", "1s", "--workers", "1", "--report", filepath.Join(t.TempDir(), report)}
	}
	var stdout, stderr bytes.Buffer
	if code := realMain(args("first"), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	var tables int
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN ('soak_rooms', 'soak_commands', 'soak_outbox')", name).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 3 {
		t.Errorf("%d of the run's 3 tables are left in %s", tables, name)
	}
	stderr.Reset()
	if code := realMain(args("second"), &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), "soak_rooms") {
		t.Errorf("a second run over the tables: exit %d, want %d naming soak_rooms:\n%s", code, exitError, stderr.String())
	}
}
