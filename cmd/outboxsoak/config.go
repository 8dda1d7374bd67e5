package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"time"
)

// config is a run's configuration: the run command's flags. It goes
// into summary.json as it is, so it holds no DSN (Target names the
// server and database without user or password).
type config struct {
	Driver         string        `json:"driver"`
	DSN            string        `json:"-"`
	Target         string        `json:"target"`
	UseDSNDatabase bool          `json:"use_dsn_database"`
	KeepDatabase   bool          `json:"keep_database"`
	Table          string        `json:"table"`
	Rate           float64       `json:"rate"`
	Duration       time.Duration `json:"duration"`
	Warmup         time.Duration `json:"warmup"`
	Drain          time.Duration `json:"drain"`
	SampleEvery    time.Duration `json:"sample_every"`
	Writers        int           `json:"writers"`
	EventsPerTx    int           `json:"events_per_tx"`
	Rooms          int           `json:"rooms"`
	Workers        int           `json:"workers"`
	Consumer       string        `json:"consumer"`
	Tuning         tuning        `json:"tuning"`
	Listener       bool          `json:"listener"`
	NotifyInterval time.Duration `json:"notify_interval,omitempty"`
	ReportDir      string        `json:"report_dir"`
	Label          string        `json:"label,omitempty"`
	WorkerLogLevel slog.Level    `json:"worker_log_level"`
	PlotFormat     string        `json:"plot_format"`
	// The faults: as given (--faults, --fault-every, --fault-kinds,
	// --seed, --db-restart-cmd), and the schedule they make.
	FaultSpec    string  `json:"fault_spec,omitempty"`
	FaultEvery   string  `json:"fault_every,omitempty"`
	FaultKinds   string  `json:"fault_kinds,omitempty"`
	Seed         uint64  `json:"seed"`
	DBRestartCmd string  `json:"db_restart_cmd,omitempty"`
	Faults       []fault `json:"faults,omitempty"`
}

// MarshalJSON writes durations as Go duration strings ("15m0s") rather
// than nanoseconds, for people reading summary.json.
func (c *config) MarshalJSON() ([]byte, error) {
	type plain config
	return json.Marshal(struct {
		*plain
		Duration    string     `json:"duration"`
		Warmup      string     `json:"warmup"`
		Drain       string     `json:"drain"`
		SampleEvery string     `json:"sample_every"`
		Tuning      tuningView `json:"tuning"`
	}{(*plain)(c), c.Duration.String(), c.Warmup.String(), c.Drain.String(), c.SampleEvery.String(), c.Tuning.view()})
}

// UnmarshalJSON reads what MarshalJSON wrote (outboxsoak report reads
// summary.json back).
func (c *config) UnmarshalJSON(b []byte) error {
	type plain config
	var v struct {
		*plain
		Duration    string     `json:"duration"`
		Warmup      string     `json:"warmup"`
		Drain       string     `json:"drain"`
		SampleEvery string     `json:"sample_every"`
		Tuning      tuningView `json:"tuning"`
	}
	v.plain = (*plain)(c)
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	var err error
	for _, d := range []struct {
		text string
		into *time.Duration
	}{
		{v.Duration, &c.Duration}, {v.Warmup, &c.Warmup}, {v.Drain, &c.Drain}, {v.SampleEvery, &c.SampleEvery},
		{v.Tuning.PollInterval, &c.Tuning.PollInterval}, {v.Tuning.Retention, &c.Tuning.Retention},
	} {
		if *d.into, err = time.ParseDuration(d.text); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	c.Tuning.Ordering, c.Tuning.BatchSize, c.Tuning.Concurrency = v.Tuning.Ordering, v.Tuning.BatchSize, v.Tuning.Concurrency
	return nil
}

// tuningView is tuning as summary.json shows it.
type tuningView struct {
	Ordering     bool   `json:"ordering"`
	PollInterval string `json:"poll_interval"`
	BatchSize    int    `json:"batch_size"`
	Concurrency  int    `json:"concurrency"`
	Retention    string `json:"retention"`
}

func (t tuning) view() tuningView {
	return tuningView{Ordering: t.Ordering, PollInterval: t.PollInterval.String(), BatchSize: t.BatchSize, Concurrency: t.Concurrency, Retention: t.Retention.String()}
}

// Defaults of the run command's flags.
const (
	DefaultRate        = 200
	DefaultDuration    = 15 * time.Minute
	DefaultWarmup      = time.Minute
	DefaultDrain       = 2 * time.Minute
	DefaultSampleEvery = 5 * time.Second
	DefaultWriters     = 16
	DefaultRooms       = 200
	DefaultWorkers     = 3
	DefaultConsumer    = "activity"
	DefaultTable       = "soak_outbox"
)

// newRunFlags returns the run command's flags, writing into cfg.
func newRunFlags(cfg *config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Driver, "driver", "", "the database: mysql (MySQL 8.0+, MariaDB 10.6+) or postgres (PostgreSQL 13+); required")
	fs.StringVar(&cfg.DSN, "dsn", "", "the server's DSN (default $"+envDSN+"): go-sql-driver/mysql's user:password@tcp(host:3306)/ or a pgx URL or key=value string; output names only its host and database")
	fs.BoolVar(&cfg.UseDSNDatabase, "use-dsn-database", false, "write into the database the DSN names (tables soak_rooms, soak_commands and the outbox's, which must not exist yet) instead of a scratch database outboxsoak_<time>_<random> the run creates on the server and drops")
	fs.BoolVar(&cfg.KeepDatabase, "keep-database", false, "keep the scratch database afterwards, to look at; by default it is dropped (with --use-dsn-database, the run's tables are always kept)")
	fs.StringVar(&cfg.Table, "table", DefaultTable, "the outbox table")
	fs.Float64Var(&cfg.Rate, "rate", DefaultRate, "events written per second, all writers together")
	fs.DurationVar(&cfg.Duration, "duration", DefaultDuration, "how long the writers write")
	fs.DurationVar(&cfg.Warmup, "warmup", DefaultWarmup, "the first part of the run, left out of the after-warm-up lag figures")
	fs.DurationVar(&cfg.Drain, "drain", DefaultDrain, "after the writers stop, the most to wait for every committed event to reach every consumer; what has not by then is lost")
	fs.DurationVar(&cfg.SampleEvery, "sample", DefaultSampleEvery, "the sampling interval")
	fs.IntVar(&cfg.Writers, "writers", DefaultWriters, "writer goroutines (each command holds one database connection)")
	fs.IntVar(&cfg.EventsPerTx, "events-per-tx", 1, "events per command (transaction)")
	fs.IntVar(&cfg.Rooms, "rooms", DefaultRooms, "keys: rooms, each a business row locked by its commands")
	fs.IntVar(&cfg.Workers, "workers", DefaultWorkers, "worker processes")
	fs.StringVar(&cfg.Consumer, "consumer", DefaultConsumer, "the named consumer every worker process also delivers; empty for the default consumer only")
	fs.BoolVar(&cfg.Tuning.Ordering, "ordering", false, "WorkerOptions.Ordering for every worker: per-key order, which the run then requires")
	fs.DurationVar(&cfg.Tuning.PollInterval, "poll-interval", 0, "WorkerOptions.PollInterval (0: the library's default)")
	fs.IntVar(&cfg.Tuning.BatchSize, "batch-size", 0, "WorkerOptions.BatchSize (0: the library's default)")
	fs.IntVar(&cfg.Tuning.Concurrency, "concurrency", 0, "WorkerOptions.Concurrency (0: the library's default)")
	fs.DurationVar(&cfg.Tuning.Retention, "retention", 0, "WorkerOptions.Retention of the default consumer's workers (0: keep everything)")
	fs.BoolVar(&cfg.Listener, "listener", true, "on PostgreSQL, a postgres.Listener in every worker process wakes its workers at each commit")
	fs.DurationVar(&cfg.NotifyInterval, "notify-interval", 0, "on PostgreSQL, postgres.Options.NotifyInterval of the writers' store: notify at most once per interval (0: on every Enqueue)")
	fs.StringVar(&cfg.ReportDir, "report", "", "the report's directory (default soak-<driver>-<time>); created, and must not hold a summary.json")
	fs.StringVar(&cfg.Label, "label", "", "a label for the report, such as before or after")
	fs.StringVar(&cfg.PlotFormat, "plot-format", "svg", "the plots' format: svg or png")
	fs.StringVar(&cfg.FaultSpec, "faults", "", "faults at set times, separated by commas: KIND[:PARAM]@AT[+FOR], such as kill-worker@2m,kill-conns@3m,db-restart@5m,sink-down@6m+15s,sink-503@7m,sink-slow:2s@8m+20s,net-stall@9m+10s (kinds: "+kindList()+")")
	fs.StringVar(&cfg.FaultEvery, "fault-every", "", "faults at random: one every MIN-MAX (such as 2m-5m) from the end of the warm-up, of the kinds of --fault-kinds in turn")
	fs.StringVar(&cfg.FaultKinds, "fault-kinds", "", "the kinds --fault-every draws from (default: every kind; db-restart only with --db-restart-cmd)")
	fs.Uint64Var(&cfg.Seed, "seed", 0, "the seed of --fault-every's draws and of kill-worker's slots (default: from the clock; the report records it)")
	fs.StringVar(&cfg.DBRestartCmd, "db-restart-cmd", "", "the shell command a db-restart fault runs, such as 'pg_ctlcluster 15 main restart' (the fault lasts until the database answers again)")
	fs.TextVar(&cfg.WorkerLogLevel, "worker-log-level", slog.LevelWarn, "the worker processes' log level (debug, info, warn, error)")
	return fs
}

// parseRunFlags parses the run command's arguments into a config with
// its defaults filled in, and validates it.
func parseRunFlags(args []string, stderr io.Writer) (*config, error) {
	cfg := &config{}
	fs := newRunFlags(cfg, stderr)
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.DSN == "" {
		cfg.DSN = os.Getenv(envDSN)
	}
	if cfg.ReportDir == "" {
		cfg.ReportDir = fmt.Sprintf("soak-%s-%s", cfg.Driver, time.Now().Format("20060102-150405"))
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, cfg.schedule()
}

// schedule makes the fault schedule of --faults and --fault-every.
func (c *config) schedule() error {
	fixed, err := parseFaults(c.FaultSpec)
	if err != nil {
		return err
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x50a4))
	c.Faults = fixed
	if c.FaultEvery != "" {
		lo, hi, err := parseGap(c.FaultEvery)
		if err != nil {
			return err
		}
		kinds, err := parseKinds(c.FaultKinds)
		if err != nil {
			return err
		}
		if len(kinds) == 0 {
			for _, k := range faultKinds {
				if k.kind != dbRestart || c.DBRestartCmd != "" {
					kinds = append(kinds, k.kind)
				}
			}
		}
		c.Faults = append(c.Faults, randomFaults(rng, kinds, lo, hi, c.Warmup, c.Duration)...)
		slices.SortStableFunc(c.Faults, func(a, b fault) int { return int(a.At - b.At) })
	} else if c.FaultKinds != "" {
		return errors.New("--fault-kinds: only with --fault-every")
	}
	assignSlots(rng, c.Faults, c.Workers)
	return checkSchedule(c.Faults, c.Duration, c.Workers, c.DBRestartCmd)
}

// identifier is what a table or consumer name may be on both servers.
var identifier = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)

// validate checks cfg; its errors name the flag and the value.
func (c *config) validate() error {
	switch {
	case c.Driver != "mysql" && c.Driver != "postgres":
		return fmt.Errorf("--driver %q: must be mysql or postgres", c.Driver)
	case c.DSN == "":
		return errNoDSN
	case !identifier.MatchString(c.Table):
		return fmt.Errorf("--table %q: must be lower-case letters, digits and _, at most 40", c.Table)
	case c.Rate <= 0 || c.Rate > 100_000:
		return fmt.Errorf("--rate %v: must be above 0 and at most 100000", c.Rate)
	case c.Duration < time.Second:
		return fmt.Errorf("--duration %v: must be at least 1s", c.Duration)
	case c.Warmup < 0 || c.Warmup >= c.Duration:
		return fmt.Errorf("--warmup %v: must be at least 0 and shorter than --duration %v", c.Warmup, c.Duration)
	case c.Drain < time.Second:
		return fmt.Errorf("--drain %v: must be at least 1s", c.Drain)
	case c.SampleEvery < 100*time.Millisecond:
		return fmt.Errorf("--sample %v: must be at least 100ms", c.SampleEvery)
	case c.Writers < 1 || c.Writers > 1000:
		return fmt.Errorf("--writers %d: must be 1 to 1000", c.Writers)
	case c.EventsPerTx < 1 || c.EventsPerTx > 100:
		return fmt.Errorf("--events-per-tx %d: must be 1 to 100", c.EventsPerTx)
	case c.Rooms < 1 || c.Rooms > 1_000_000:
		return fmt.Errorf("--rooms %d: must be 1 to 1000000", c.Rooms)
	case c.Workers < 1 || c.Workers > 64:
		return fmt.Errorf("--workers %d: must be 1 to 64", c.Workers)
	case c.PlotFormat != "svg" && c.PlotFormat != "png":
		return fmt.Errorf("--plot-format %q: must be svg or png", c.PlotFormat)
	case c.NotifyInterval < 0 || c.NotifyInterval > time.Minute:
		return fmt.Errorf("--notify-interval %v: must be 0 to 1m", c.NotifyInterval)
	case c.NotifyInterval > 0 && c.Driver != "postgres":
		return fmt.Errorf("--notify-interval %v: PostgreSQL only (--driver postgres)", c.NotifyInterval)
	case c.Consumer == defaultConsumer:
		return fmt.Errorf("--consumer %q: the default consumer is always delivered; name another", c.Consumer)
	case c.Consumer != "" && !identifier.MatchString(c.Consumer):
		return fmt.Errorf("--consumer %q: must be lower-case letters, digits and _, at most 40", c.Consumer)
	case c.Tuning.PollInterval < 0 || c.Tuning.BatchSize < 0 || c.Tuning.Concurrency < 0 || c.Tuning.Retention < 0:
		return errors.New("--poll-interval, --batch-size, --concurrency and --retention: must not be negative")
	}
	return nil
}

// consumers returns the consumers the run delivers: the default one,
// and the named one if any.
func (c *config) consumers() []string {
	if c.Consumer == "" {
		return []string{defaultConsumer}
	}
	return []string{defaultConsumer, c.Consumer}
}
