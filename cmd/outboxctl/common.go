package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	mysqldrv "github.com/go-sql-driver/mysql"

	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// cli is one run of a command.
type cli struct {
	name        string
	out, errOut io.Writer
	dsn, table  string
	// consumer is the named consumer a command looks at (--consumer);
	// empty: the default consumer, the outbox table's own status.
	consumer string
	json     bool
	// args are the positional arguments, once parsed.
	args  []string
	db    *sql.DB
	store *mysql.Store
}

// flags returns the command's flag set with the common flags on it.
func (c *cli) flags(usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(c.errOut)
	// The default is named, not shown: -h and a mistyped flag print a
	// flag's default, and a DSN holds a password. connect reads it.
	fs.StringVar(&c.dsn, "dsn", "", "MySQL DSN of the outbox's database (default $OUTBOXCTL_DSN, then $MYSQL_DSN)")
	fs.StringVar(&c.table, "table", mysql.DefaultTable, "outbox table name")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(c.errOut, "usage: outboxctl %s %s\n", c.name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// addConsumerFlag adds --consumer to a command that can look at a named
// consumer's delivery state instead of the default one.
func (c *cli) addConsumerFlag(fs *flag.FlagSet) {
	fs.StringVar(&c.consumer, "consumer", "", "a named consumer's delivery state instead of the default consumer's (the table's status column)")
}

// state is the delivery state a command reads and repairs: the Store
// (default consumer) or a ConsumerStore.
type state interface {
	Get(ctx context.Context, id string) (outbox.Record, error)
	Stats(ctx context.Context) (backend.Stats, error)
	Requeue(ctx context.Context, id string) error
	RequeueDead(ctx context.Context, f mysql.DeadFilter, opts mysql.RequeueOptions) (int, error)
	CountDead(ctx context.Context, f mysql.DeadFilter) (int, error)
}

// connectState connects (see connect) and returns the delivery state
// --consumer names, and how to name it in messages.
func (c *cli) connectState(ctx context.Context) (st state, where string, code int, ok bool) {
	if code, ok := c.connect(ctx); !ok {
		return nil, "", code, false
	}
	if c.consumer == "" {
		return c.store, c.table, exitOK, true
	}
	cs, err := c.store.Consumer(c.consumer)
	if err != nil {
		c.close()
		return nil, "", c.usageError("%v", err), false
	}
	return cs, fmt.Sprintf("%s (consumer %s)", c.table, c.consumer), exitOK, true
}

// parse parses args, flags before or after the positional arguments
// (operators write "show ID --json"); the positional ones are left in
// c.args. A usage problem returns (exitUsage, false), -h (exitOK, false).
func (c *cli) parse(fs *flag.FlagSet, args []string) (int, bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return exitOK, false
			}
			return exitUsage, false
		}
		if fs.NArg() == 0 {
			return exitOK, true
		}
		c.args = append(c.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// usageError reports a usage problem and returns exitUsage.
func (c *cli) usageError(format string, args ...any) int {
	fmt.Fprintf(c.errOut, "outboxctl %s: "+format+"\n", append([]any{c.name}, args...)...)
	return exitUsage
}

// fail reports a failure and returns code.
func (c *cli) fail(code int, err error) int {
	fmt.Fprintf(c.errOut, "outboxctl %s: %v\n", c.name, err)
	return code
}

// connect opens the database and checks that the table is an outbox
// table, without changing anything.
func (c *cli) connect(ctx context.Context) (int, bool) {
	if c.dsn == "" {
		c.dsn = dsnFromEnv()
	}
	if c.dsn == "" {
		return c.usageError("no database: pass --dsn or set OUTBOXCTL_DSN"), false
	}
	// Errors name the DSN's user, address and database, never its
	// password; the driver's own parse errors can quote it.
	cfg, err := dsnsafe.Parse(c.dsn)
	if err != nil {
		return c.usageError("--dsn: %v", err), false
	}
	target := dsnsafe.Target(cfg)
	if cfg.DBName == "" {
		return c.usageError("--dsn %s names no database", target), false
	}
	connector, err := mysqldrv.NewConnector(cfg)
	if err != nil {
		return c.fail(exitFailed, fmt.Errorf("--dsn %s: %w", target, dsnsafe.Err(err, cfg.Passwd))), false
	}
	c.db = sql.OpenDB(connector)
	c.db.SetMaxOpenConns(2)
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.db.PingContext(pingCtx); err != nil {
		return c.fail(exitFailed, fmt.Errorf("cannot reach %s: %w", target, dsnsafe.Err(err, cfg.Passwd))), false
	}
	if c.store, err = mysql.New(c.db, mysql.Options{Table: c.table}); err != nil {
		return c.usageError("%v", err), false
	}
	if err := c.store.Verify(ctx); err != nil {
		return c.fail(exitFailed, err), false
	}
	return exitOK, true
}

func (c *cli) close() {
	if c.db != nil {
		_ = c.db.Close()
	}
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) int {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return c.fail(exitFailed, err)
	}
	return exitOK
}

// table starts an aligned table with a header row.
func (c *cli) newTable(header ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(c.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	return tw
}

// safe makes outside text harmless on a terminal: control characters
// (escape sequences among them) and invalid UTF-8 are shown escaped,
// newlines and tabs only when keepLines is set.
func safe(s string, keepLines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.In(r, unicode.Bidi_Control):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// short is safe(s) cut to n runes, for table cells.
func short(s string, n int) string {
	s = safe(s, false)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// age renders a duration for people.
func age(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

// The environment variables --dsn defaults to, in order. Only their names
// are ever printed: a DSN holds a password.
var dsnEnv = []string{"OUTBOXCTL_DSN", "MYSQL_DSN"}

// dsnFromEnv is the first of dsnEnv that is set.
func dsnFromEnv() string {
	for _, n := range dsnEnv {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
