// Command bench measures outboxrelay against a raw-SQL ceiling and the
// Watermill SQL forwarder, on one MySQL or MariaDB, in one run, and prints
// every figure as a ratio against a reference from the same run.
//
//	cd bench && go run . [-dsn 'root@tcp(127.0.0.1:3306)/'] [-quick] [-only NAME] [-server-pid PID] [-rounds N] [-events N] [-cpuprofile FILE]
//
// The consumers scenario (-only consumers) drains one backlog with 0, 1
// and 3 named consumers beside the default one and reports the redo per
// enqueued event and its growth per consumer added; with -server-pid it
// and the compare scenario report the server's CPU time per event too.
//
// It is a module of its own so that the library never depends on the peer.
// It creates (and drops) a database named outboxrelay_bench.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

const (
	dbName = "outboxrelay_bench"
	table  = "bench_outbox"
)

// sizes scales the runs; -quick shrinks them for a smoke test.
type sizes struct {
	relayEvents    func(batch int) int
	ceilingEvents  int
	peerEvents     int
	published      int // history rows for the backlog scenario
	backlog        int
	slowEvents     int
	latencyRate    int // events per second
	latencyFor     time.Duration
	enqueueTxs     int
	compareEvents  int // per drain of the compare scenario
	compareRounds  int
	compareConfigs []compareConfig // from the -compare and -ordered flags
	consumerEvents int             // per drain of the consumer log scenario
	consumerCounts []int           // its numbers of named consumers
	histories      []historyCase
}

// compareConfigs are the configurations of the compare scenario: those
// issue 17 names (1 and 4 workers, 256 B and 512 B payloads) and issue
// 30's 8 and 16 workers, where a claim that steps over the other
// instances' leases shows.
var compareConfigs = []benchkit.Config{
	{Workers: 1, Batch: 100, Payload: 512}, {Workers: 1, Batch: 100, Payload: 256},
	{Workers: 4, Batch: 200, Payload: 512}, {Workers: 4, Batch: 200, Payload: 256},
	{Workers: 8, Batch: 100, Payload: 512}, {Workers: 8, Batch: 200, Payload: 256},
	{Workers: 16, Batch: 100, Payload: 512}, {Workers: 16, Batch: 200, Payload: 256},
}

var full = sizes{
	relayEvents:   func(batch int) int { return min(max(batch*300, 3000), 60000) },
	ceilingEvents: 60000, peerEvents: 20000,
	published: 1_000_000, backlog: 100_000,
	slowEvents: 1200, latencyRate: 1000, latencyFor: 5 * time.Second, enqueueTxs: 3000,
	compareEvents: 30000, compareRounds: 5,
	consumerEvents: 30000, consumerCounts: consumerCounts,
	histories: []historyCase{{5_000, true}, {20_000, true}, {200_000, false}},
}

var quick = sizes{
	relayEvents:   func(int) int { return 500 },
	ceilingEvents: 2000, peerEvents: 1000,
	published: 20_000, backlog: 5_000,
	slowEvents: 100, latencyRate: 200, latencyFor: time.Second, enqueueTxs: 200,
	compareEvents: 600, compareRounds: 1,
	consumerEvents: 600, consumerCounts: consumerCounts,
	histories: []historyCase{{2_000, true}},
}

// row is one line of the report.
type row = benchkit.Row

func main() {
	dsn := flag.String("dsn", envOr("OUTBOXRELAY_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"), "MySQL/MariaDB server DSN")
	q := flag.Bool("quick", false, "small sizes: a smoke test, not a measurement")
	only := flag.String("only", "", "run only the scenarios whose names contain this (compare, relay, consumers, peer, backlog, slow, latency, enqueue, history); the peer needs relay")
	cpuprofile := flag.String("cpuprofile", "", "write the bench process's CPU profile to this file")
	configs := flag.String("compare", "", "the compare scenario's configurations, as WORKERSxBATCHxPAYLOAD separated by commas (default: those of issues 17 and 30, "+benchkit.FormatConfigs(compareConfigs)+")")
	rounds := flag.Int("rounds", 0, "the alternating rounds of the compare scenario and of the consumers scenario's 0, 1 and 3 named consumers (default: 5, 1 with -quick)")
	serverPID := flag.Int("server-pid", 0, "the server's process ID, when it runs on this machine: the compare and consumers scenarios then report the server's CPU time per event (from /proc)")
	events := flag.Int("events", 0, "events per drain of the compare scenario and of the consumers scenario's 0, 1 and 3 named consumers (default: 30000, 600 with -quick)")
	ordered := flag.Bool("ordered", false, "the compare scenario drains the relay with WorkerOptions.Ordering (the ceiling and Watermill have none)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	sz := full
	if *q {
		sz = quick
	}
	shapes := compareConfigs
	if *configs != "" {
		c, err := benchkit.ParseConfigs(*configs)
		if err != nil {
			log.Fatalf("-compare: %v", err)
		}
		shapes = c
	}
	for _, c := range shapes {
		sz.compareConfigs = append(sz.compareConfigs, compareConfig{Config: c, ordered: *ordered})
	}
	switch {
	case *rounds < 0:
		log.Fatalf("-rounds: %d is negative", *rounds)
	case *rounds > 0:
		sz.compareRounds = *rounds
	}
	switch {
	case *events < 0:
		log.Fatalf("-events: %d is negative", *events)
	case *events > 0:
		sz.compareEvents, sz.consumerEvents = *events, *events
	}
	ctx := context.Background()
	b, err := open(ctx, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer b.close()
	b.serverPID = *serverPID

	var rows []row
	for _, scenario := range []struct {
		name string
		run  func(context.Context, sizes) ([]row, error)
	}{
		{"compare", b.compare}, {"relay", b.relayAndCeiling}, {"consumers", b.namedConsumers}, {"peer", b.peer}, {"backlog", b.backlogScaling},
		{"slow", b.slowSink}, {"latency", b.latency}, {"enqueue", b.enqueueOverhead}, {"history", b.history},
	} {
		if !strings.Contains(scenario.name, *only) {
			continue
		}
		r, err := scenario.run(ctx, sz)
		if err != nil {
			log.Fatal(err)
		}
		rows = append(rows, r...)
		benchkit.PrintRows(os.Stderr, r) // progress
	}
	fmt.Printf("machine: %d CPUs, %s/%s, %s, server %s\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), b.version)
	benchkit.PrintRows(os.Stdout, rows)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// bench holds the database the scenarios share.
type bench struct {
	admin, db *sql.DB
	dsn       string // of the bench database
	version   string
	// relay100 is the relay's rate at batch 100 with one worker, the
	// reference for the peer.
	relay100 float64
	// serverPID is the server's process ID, 0 when unknown.
	serverPID int
}

func open(ctx context.Context, serverDSN string) (*bench, error) {
	cfg, err := dsnsafe.Parse(serverDSN) // its errors quote nothing of the DSN
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	cfg.DBName = ""
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	for _, q := range []string{"DROP DATABASE IF EXISTS " + dbName, "CREATE DATABASE " + dbName} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("%s on %s: %w", q, dsnsafe.Target(cfg), dsnsafe.Hide(err, cfg))
		}
	}
	cfg.DBName, cfg.InterpolateParams, cfg.ParseTime = dbName, true, true
	b := &bench{admin: admin, dsn: cfg.FormatDSN()}
	if b.db, err = b.pool(); err != nil {
		return nil, err
	}
	err = b.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&b.version)
	return b, err
}

// pool opens a new connection pool on the bench database (interpolated
// parameters for every contender alike).
func (b *bench) pool() (*sql.DB, error) {
	return benchkit.OpenDB("mysql", b.dsn, 16)
}

func (b *bench) close() {
	b.db.Close()
	_, _ = b.admin.Exec("DROP DATABASE IF EXISTS " + dbName)
	b.admin.Close()
}

// freshStore recreates the outbox table, and its companion tables,
// empty.
func (b *bench) freshStore(ctx context.Context, db *sql.DB) (*mysql.Store, error) {
	for _, suffix := range []string{"_consumption", "_consumers", "_ranges", "_state", "_gaps", "_schema_version", ""} {
		if _, err := b.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+table+suffix); err != nil {
			return nil, err
		}
	}
	s, err := mysql.New(db, mysql.Options{Table: table})
	if err != nil {
		return nil, err
	}
	return s, s.Migrate(ctx)
}

// fill writes n pending (or published) messages with a small payload.
func (b *bench) fill(ctx context.Context, offset, n int, status string) error {
	return b.fillSized(ctx, offset, n, status, `'{"gift":"rose","count":1}'`)
}

// fillSized writes n messages on 200 keys with one INSERT … SELECT over
// generated numbers (payload is an SQL expression of n). It gives the ids
// itself, each after the table's last: a bulk insert left to
// AUTO_INCREMENT reserves ids in blocks and leaves the ones it did not use
// as a hole before the next message, and the log's readers would wait
// GapTimeout there. Published ones are behind every consumer's position,
// as if delivered.
func (b *bench) fillSized(ctx context.Context, offset, n int, status, payload string) error {
	var last int64
	if err := b.db.QueryRowContext(ctx, "SELECT COALESCE(MAX(id), 0) FROM "+table).Scan(&last); err != nil {
		return err
	}
	q := fmt.Sprintf("INSERT INTO %s (id, event_id, event_key, event_type, payload, created_at)"+
		" SELECT %d + n, CONCAT('e-', n + %d), CONCAT('room-', n %% 200), 'RoomGiftSent', %s, UTC_TIMESTAMP(6) FROM %s ORDER BY n",
		table, last+1, offset, payload, numbers(n))
	if _, err := b.db.ExecContext(ctx, q); err != nil {
		return err
	}
	if status == "published" {
		_, err := b.db.ExecContext(ctx, "UPDATE "+table+"_consumers SET walked = (SELECT MAX(id) FROM "+table+")")
		return err
	}
	return nil
}

// pendingOf counts what the consumers (the default one for "") have left
// to deliver, through the operator contract (Stats), whatever the
// store's schema.
func (b *bench) pendingOf(consumers ...string) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		s, err := mysql.New(b.db, mysql.Options{Table: table})
		if err != nil {
			return 0, err
		}
		left := 0
		for _, c := range consumers {
			q, err := s.ConsumerQueue(c)
			if err != nil {
				return 0, err
			}
			st, err := q.Stats(ctx)
			if err != nil {
				return 0, err
			}
			left += st.Pending
		}
		return left, nil
	}
}
