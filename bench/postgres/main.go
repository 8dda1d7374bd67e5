// Command postgres measures outboxrelay's PostgreSQL store against a
// minimal SKIP LOCKED ceiling, Watermill's PostgreSQL queue schema and
// River (tuned in its favour, and at its default fetch settings), on one
// PostgreSQL, in one run, and prints every figure as a ratio against a
// reference from the same run (issues 31 and 38).
//
//	cd bench/postgres && go run . [-dsn postgres://postgres@127.0.0.1:5433/postgres?sslmode=disable] [-quick] [-only NAME] [-server-pid PID]
//
// Its scenarios: compare (the arms drain the same backlog; WAL, rows and,
// with -server-pid, the server's CPU time per delivered event), consumers
// (one backlog drained with 0, 1 and 3 named consumers beside the default
// one; WAL per enqueued event and its growth per consumer added) and
// latency. -server-pid is the postmaster's PID (the first line of
// postmaster.pid): the server's CPU time is that of the postmaster and
// all its children, read from /proc, so the server must run on this
// machine.
//
// It is a module of its own so that neither the library nor the MySQL
// bench (bench/) requires River, pgx or Watermill's PostgreSQL code. It
// creates (and drops) a database named outboxrelay_pgbench. Run it against
// a server nobody else uses meanwhile: the WAL position and the statistics
// it reads are server-wide (WAL) or database-wide (row counters).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/bench/internal/benchkit"
)

// sizes scales the runs; -quick shrinks them for a smoke test.
type sizes struct {
	compareEvents  int // per drain
	compareRounds  int
	compareConfigs []compareConfig
	consumerEvents int   // per drain of the consumers scenario
	consumerCounts []int // the named consumers beside the default one
	latencyRate    int   // events per second
	latencyFor     time.Duration
}

// compareConfigs are issue 31's configurations: 1 and 4 workers, 256 B
// and 512 B payloads, at the batch sizes of the MySQL compare.
var compareConfigs = []compareConfig{{Workers: 1, Batch: 100, Payload: 512}, {Workers: 1, Batch: 100, Payload: 256}, {Workers: 4, Batch: 200, Payload: 512}, {Workers: 4, Batch: 200, Payload: 256}}

// consumerCounts are issue 38's numbers of named consumers.
var consumerCounts = []int{0, 1, 3}

var full = sizes{compareEvents: 20000, compareRounds: 5, compareConfigs: compareConfigs, consumerEvents: 20000, consumerCounts: consumerCounts,
	latencyRate: 1000, latencyFor: 5 * time.Second}

var quick = sizes{compareEvents: 600, compareRounds: 1, compareConfigs: compareConfigs, consumerEvents: 600, consumerCounts: consumerCounts,
	latencyRate: 200, latencyFor: time.Second}

// row is one line of the report.
type row = benchkit.Row

const defaultDSN = "postgres://postgres@127.0.0.1:5433/postgres?sslmode=disable"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func main() {
	dsn := flag.String("dsn", defaultDSN, "PostgreSQL server DSN (a URL); the bench creates and drops its own database there")
	q := flag.Bool("quick", false, "small sizes: a smoke test, not a measurement")
	only := flag.String("only", "", "run only the scenarios whose names contain this (compare, consumers, latency)")
	arms := flag.String("arms", "", "the compare scenario's arms, separated by commas (default: all of "+strings.Join(armNames(), ",")+")")
	configs := flag.String("compare", "", "the compare scenario's configurations, as WORKERSxBATCHxPAYLOAD separated by commas (default: "+benchkit.FormatConfigs(compareConfigs)+")")
	rounds := flag.Int("rounds", 0, "the compare and consumers scenarios' alternating rounds (default: 5, 1 with -quick)")
	events := flag.Int("events", 0, "events per drain of the compare and consumers scenarios (default: 20000, 600 with -quick)")
	flag.DurationVar(&riverCooldown, "river-cooldown", riverCooldown, "River's FetchCooldown in the compare scenario (River's default is 100ms)")
	flag.IntVar(&relayFillfactor, "relay-fillfactor", 0, "an experiment: the relay's table with this fillfactor (default: the store's schema as it is)")
	flag.BoolVar(&relayToast, "relay-toast", false, "an experiment: the relay's payloads stored out of line (toast_tuple_target 128, STORAGE EXTERNAL)")
	flag.IntVar(&riverMaxWorkers, "river-maxworkers", 0, "River's MaxWorkers per client in the compare scenario (default: the batch)")
	cpuprofile := flag.String("cpuprofile", "", "write the bench process's CPU profile to this file")
	serverPID := flag.Int("server-pid", 0, "the postmaster's process ID (the first line of postmaster.pid), when the server runs on this machine: the compare and consumers scenarios then report the server's CPU time per event (the postmaster and all its children, from /proc)")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatalf("-cpuprofile: %v", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatalf("-cpuprofile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	sz := full
	if *q {
		sz = quick
	}
	if *configs != "" {
		c, err := benchkit.ParseConfigs(*configs)
		if err != nil {
			log.Fatalf("-compare: %v", err)
		}
		sz.compareConfigs = c
	}
	if *rounds < 0 || *events < 0 {
		log.Fatalf("-rounds %d, -events %d: must be >= 0", *rounds, *events)
	}
	if *rounds > 0 {
		sz.compareRounds = *rounds
	}
	if *events > 0 {
		sz.compareEvents, sz.consumerEvents = *events, *events
	}
	ctx := context.Background()
	b, err := open(ctx, *dsn, defaultDBName)
	if err != nil {
		log.Fatal(err)
	}
	defer b.close()
	if *serverPID != 0 {
		if _, err := readCPU(*serverPID); err != nil {
			b.close()
			log.Fatalf("-server-pid %d: %v", *serverPID, err) //nolint:gocritic // closed above
		}
		b.serverPID = *serverPID
	}
	if *arms != "" {
		if err := b.pickArms(strings.Split(*arms, ",")); err != nil {
			log.Fatalf("-arms: %v", err)
		}
	}
	res, err := b.run(ctx, sz, *only, os.Stderr)
	if err != nil {
		b.close()
		log.Fatal(err) //nolint:gocritic // closed above
	}
	fmt.Printf("machine: %d CPUs, %s/%s, %s, server %s, load average %s\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), b.version, benchkit.LoadAverage())
	benchkit.PrintRows(os.Stdout, res)
}

// run runs the scenarios whose names contain only, printing each
// scenario's rows to progress as it ends, and returns all the rows.
func (b *bench) run(ctx context.Context, sz sizes, only string, progress io.Writer) ([]row, error) {
	var rows []row
	for _, scenario := range []struct {
		name string
		run  func(context.Context, sizes) ([]row, error)
	}{{"compare", b.compare}, {"consumers", b.consumers}, {"latency", b.latency}} {
		if !strings.Contains(scenario.name, only) {
			continue
		}
		fmt.Fprintf(progress, "%s: %s, load average %s\n", scenario.name, time.Now().UTC().Format(time.TimeOnly), benchkit.LoadAverage())
		r, err := scenario.run(ctx, sz)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", scenario.name, err)
		}
		rows = append(rows, r...)
		benchkit.PrintRows(progress, r)
	}
	return rows, nil
}
