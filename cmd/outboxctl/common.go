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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// cli is one run of a command.
type cli struct {
	name, summary string
	// usageLine is how to call the command, after its name.
	usageLine   string
	out, errOut io.Writer
	dsn, table  string
	// dsnFrom names the environment variable the DSN came from; empty
	// when --dsn gave it.
	dsnFrom string
	// tableFrom is where the table's name came from: tableFromFlag,
	// tableFromEnv or tableFromDefault.
	tableFrom string
	// dbName is the DSN's database, once open.
	dbName string
	// driverName is --driver; driver the driver in use, once resolved.
	driverName string
	driver     *driver
	// timeout bounds each database operation (--timeout).
	timeout time.Duration
	// consumer is the named consumer a command looks at (--consumer);
	// empty: the default consumer, the outbox table's own status.
	consumer string
	json     bool
	// args are the positional arguments, once parsed.
	args  []string
	db    *sql.DB
	store outboxStore
}

// defaultTimeout is --timeout's default.
const defaultTimeout = 30 * time.Second

// baseFlags returns the command's flag set with --json on it. The flag
// package prints nothing: parse reports errors, as text or JSON, and
// help.
func (c *cli) baseFlags(usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.BoolVar(&c.json, "json", c.json, "print JSON instead of a table, and errors as JSON on stderr")
	c.usageLine = usage
	return fs
}

// flags returns the command's flag set with the flags of every command
// that reads the database on it.
func (c *cli) flags(usage string) *flag.FlagSet {
	fs := c.baseFlags(usage)
	// The default is named, not shown: -h and a mistyped flag print a
	// flag's default, and a DSN holds a password. connect reads it.
	fs.StringVar(&c.dsn, "dsn", "", "DSN of the outbox's database: MySQL's USER:PASSWORD@tcp(HOST:PORT)/DB, or PostgreSQL's postgres://USER:PASSWORD@HOST:PORT/DB or host=HOST dbname=DB (default $OUTBOXCTL_DSN, then $MYSQL_DSN, then $DATABASE_URL)")
	c.addDriverFlag(fs)
	// Empty: resolveTable fills it in from $OUTBOXCTL_TABLE or the default.
	fs.StringVar(&c.table, "table", "", fmt.Sprintf("outbox table name (default $%s, then %q)", tableEnv, defaultTable))
	durationFlag(fs, &c.timeout, "timeout", defaultTimeout, "the most each database operation may take, connecting included (exit 6 when exceeded): a `duration`, "+durationHelp)
	return fs
}

// addDriverFlag adds --driver.
func (c *cli) addDriverFlag(fs *flag.FlagSet) {
	fs.StringVar(&c.driverName, "driver", "", "the database's kind, one of "+driverNames()+" (default $"+driverEnv+", else postgres for a PostgreSQL DSN, else mysql)")
}

// printUsage writes the command's usage: how to call it, what it does,
// its flags and the exit codes.
func (c *cli) printUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: outboxctl %s %s\n\n%s\n\nflags:\n", c.name, c.usageLine, c.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprintf(w, "\n%s\n", exitCodesText())
}

// addConsumerFlag adds --consumer to a command that can look at a named
// consumer's delivery state instead of the default one.
func (c *cli) addConsumerFlag(fs *flag.FlagSet) {
	fs.StringVar(&c.consumer, "consumer", "", "a named consumer's delivery state instead of the default consumer's (the table's status column)")
}

// state is the delivery state a command reads and repairs: the default
// consumer's or a named consumer's (the operator contract's Queue).
type state = backend.Queue

// connectState connects (see connect) and returns the delivery state
// --consumer names, and how to name it in messages.
func (c *cli) connectState() (st state, where string, code int, ok bool) {
	if code, ok := c.connect(); !ok {
		return nil, "", code, false
	}
	if c.consumer == "" {
		return c.store, c.table, exitOK, true
	}
	cs, err := c.store.ConsumerQueue(c.consumer)
	if err != nil {
		c.close()
		return nil, "", c.usageError("--consumer: %v", err), false
	}
	return cs, fmt.Sprintf("%s (consumer %s)", c.table, c.consumer), exitOK, true
}

// parse parses args, flags before or after the positional arguments
// (operators write "show ID --json"); the positional ones are left in
// c.args. A usage problem is reported in one line, naming the flag and
// the value at fault, and returns (exitUsage, false); -h prints the
// usage on stdout and returns (exitOK, false).
func (c *cli) parse(fs *flag.FlagSet, args []string) (int, bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.printUsage(c.out, fs)
				return exitOK, false
			}
			// One line, not the usage: it buries the error (-h asks for it).
			return c.usageError("%s (run outboxctl help %s)", flagError(fs, err), c.name), false
		}
		if fs.NArg() == 0 {
			return c.resolveTable(fs)
		}
		c.args = append(c.args, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseNoArgs is parse for a command that takes no positional
// arguments: one given is a usage error that names it (extraArgs, with
// lookup's hint) and returns (exitUsage, false).
func (c *cli) parseNoArgs(fs *flag.FlagSet, args []string, lookup func([]string) string) (int, bool) {
	if code, ok := c.parse(fs, args); !ok {
		return code, false
	}
	if len(c.args) > 0 {
		return c.extraArgs(c.name+" takes no arguments", c.args, lookup), false
	}
	return exitOK, true
}

// wantsJSON reports whether args ask for JSON, read before any parsing so
// that an error in an earlier flag is reported as JSON too.
func wantsJSON(args []string) bool {
	on := false
	for _, a := range args {
		if a == "--" {
			break
		}
		if isJSONFlag(a) {
			on = jsonFlagValue(a)
		}
	}
	return on
}

// isJSONFlag reports whether a is --json, -json or their =value forms.
func isJSONFlag(a string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
	return strings.HasPrefix(a, "-") && len(a)-len(strings.TrimLeft(a, "-")) <= 2 && name == "json"
}

func jsonFlagValue(a string) bool {
	_, v, ok := strings.Cut(a, "=")
	if !ok {
		return true
	}
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// usageError reports a usage problem and returns exitUsage.
func (c *cli) usageError(format string, args ...any) int {
	return c.errorf(exitUsage, format, args...)
}

// fail reports a failure and returns code, or exitTimeout when err is a
// timeout (see call).
func (c *cli) fail(code int, err error) int {
	if te := (*timeoutError)(nil); errors.As(err, &te) {
		code = exitTimeout
	}
	return c.errorf(code, "%v", err)
}

// jsonError is an error as --json prints it on stderr.
type jsonError struct {
	Code     string `json:"code"`
	ExitCode int    `json:"exit_code"`
	Message  string `json:"message"`
}

// errorf prints an error, as text or (--json) as a JSON object on
// stderr, and returns code.
func (c *cli) errorf(code int, format string, args ...any) int {
	msg := fmt.Sprintf(format, args...)
	if !c.json {
		prefix := "outboxctl"
		if c.name != "" {
			prefix += " " + c.name
		}
		fmt.Fprintf(c.errOut, "%s: %s\n", prefix, msg)
		return code
	}
	_ = json.NewEncoder(c.errOut).Encode(map[string]jsonError{"error": {Code: exitName(code), ExitCode: code, Message: msg}})
	return code
}

// warn prints a warning, as text or (--json) as a JSON object on stderr.
func (c *cli) warn(err error) {
	if c.json {
		_ = json.NewEncoder(c.errOut).Encode(map[string]map[string]string{"warning": {"message": err.Error()}})
		return
	}
	fmt.Fprintf(c.errOut, "outboxctl %s: warning: %v\n", c.name, err)
}

// timeoutError is a database operation that took longer than --timeout.
type timeoutError struct {
	after time.Duration
	err   error
}

func (e *timeoutError) Error() string {
	return fmt.Sprintf("timed out after %v (--timeout): %v", e.after, e.err)
}

func (e *timeoutError) Unwrap() error { return e.err }

// call runs one database operation with a deadline of --timeout. An
// error after the deadline passed is a *timeoutError.
func call[T any](c *cli, op func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	v, err := op(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return v, &timeoutError{after: c.timeout, err: err}
	}
	return v, err
}

// call0 is call for an operation with no result.
func call0(c *cli, op func(ctx context.Context) error) error {
	_, err := call(c, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })
	return err
}

// connect opens the database and checks that the table is an outbox
// table, without changing anything.
func (c *cli) connect() (int, bool) {
	if code, ok := c.open(); !ok {
		return code, false
	}
	if err := call0(c, c.store.Verify); err != nil {
		return c.fail(exitFailed, c.explainVerify(err)), false
	}
	return exitOK, true
}

// open opens the database and makes the store, without checking the
// table (migrate makes or upgrades it).
func (c *cli) open() (int, bool) {
	if code, err := c.dial(); err != nil {
		return c.errorf(code, "%v", err), false
	}
	var err error
	if c.store, err = c.driver.openStore(c.db, c.table); err != nil {
		if strings.Contains(c.table, "@") { // the store's error would quote it
			return c.usageError("%s %s: not a table name", c.tableFrom, argText(c.table)), false
		}
		return c.usageError("%s: %v", c.tableSource(), err), false
	}
	return exitOK, true
}

// dial opens the DSN's database and checks that it answers. Its errors
// name the DSN's user, address and database, never its password (the
// driver's own parse errors can quote it), and the environment variable
// it came from; the code is the exit code they call for.
func (c *cli) dial() (int, error) {
	if c.timeout <= 0 {
		return exitUsage, fmt.Errorf("--timeout %v: must be positive", c.timeout)
	}
	if c.dsn == "" {
		c.dsn, c.dsnFrom = dsnFromEnv()
	}
	if c.dsn == "" {
		return exitUsage, errors.New("no database: pass --dsn or set OUTBOXCTL_DSN")
	}
	from := ""
	if c.dsnFrom != "" {
		from = fmt.Sprintf(" (from $%s: --dsn not given)", c.dsnFrom)
	}
	d, err := c.pickDriver()
	if err != nil {
		return exitUsage, err
	}
	cn, err := d.connect(c.dsn)
	switch {
	case errors.Is(err, errNoDatabase):
		return exitUsage, fmt.Errorf("--dsn %s names no database%s", cn.target, from)
	case err != nil && cn.target == "":
		return exitUsage, fmt.Errorf("--dsn: %v%s", err, from)
	case err != nil:
		return exitFailed, fmt.Errorf("--dsn %s%s: %v", cn.target, from, err)
	}
	cn.db.SetMaxOpenConns(2)
	if err := call0(c, cn.db.PingContext); err != nil {
		_ = cn.db.Close()
		code := exitFailed
		if te := (*timeoutError)(nil); errors.As(err, &te) {
			code = exitTimeout // hide below may hide the type
		}
		return code, fmt.Errorf("cannot reach %s: %v", cn.target, cn.hide(err))
	}
	c.db, c.dbName, c.driver = cn.db, cn.dbName, d
	return exitOK, nil
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

// safe makes outside text harmless on a terminal (safetext.Escape).
func safe(s string, keepLines bool) string { return safetext.Escape(s, keepLines) }

// short is safe(s) cut to n runes, for table cells.
func short(s string, n int) string { return safetext.Short(s, n) }

// age renders a duration for people.
func age(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Second).String()
}

// The environment variables --dsn defaults to, in order. Only their names
// are ever printed: a DSN holds a password.
var dsnEnv = []string{"OUTBOXCTL_DSN", "MYSQL_DSN", "DATABASE_URL"}

// dsnFromEnv is the first of dsnEnv that is set, and its name.
func dsnFromEnv() (dsn, name string) {
	for _, n := range dsnEnv {
		if v := os.Getenv(n); v != "" {
			return v, n
		}
	}
	return "", ""
}
