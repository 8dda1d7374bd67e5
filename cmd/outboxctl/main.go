// Command outboxctl inspects and repairs an outbox table in MySQL,
// MariaDB or PostgreSQL, so that operators need not write SQL by hand.
//
//	outboxctl stats                         the backlog: pending, leased, dead, oldest pending age, by type; per named consumer
//	outboxctl list [--status S] [--type T] [--key K] [--limit N] [--after SEQ]
//	outboxctl show ID [--consumer NAME]     one record, its payload shown safely
//	outboxctl requeue ID | --type/--key/--older-than/--error-contains/--all  [--consumer NAME]
//	outboxctl purge --older-than DURATION   delete published records every consumer is done with (retention)
//	outboxctl consumers [list] | add NAME --from now|beginning | remove NAME
//	outboxctl schema [--from V] [--to V] [--inbox]  the schema's SQL for --table (or an inbox table), for a migration tool or a DBA
//	outboxctl migrate                       create or upgrade the tables (Store.Migrate)
//	outboxctl ui [--addr 127.0.0.1:0] [--read-only] [--allow-host NAME]  the operator's dashboard in a browser, on loopback, until Ctrl-C
//	outboxctl version                       the build: module version, VCS revision, Go version
//	outboxctl help [COMMAND]                a command's flags
//
// Every command that reads the database takes --dsn (or OUTBOXCTL_DSN,
// then MYSQL_DSN, then DATABASE_URL; usage and errors never show a DSN's
// password), --driver (mysql or postgres; by default $OUTBOXCTL_DRIVER,
// else told by the DSN's form: a postgres:// URL or host=... dbname=...
// is PostgreSQL's), --table
// (or OUTBOXCTL_TABLE, then "outbox"; when the table does not exist, the
// error lists the outbox tables that do), --timeout (default 30s: the
// most any one database operation may take, connecting included) and
// --json. Durations take d (24h) and w (7d) besides Go's units: 1d,
// 2d12h, 1w. requeue, purge, consumers add, consumers remove and migrate
// change data: without --yes they only show what they would do (and exit
// 3); --dry-run does the same and exits 0.
//
// A mistake is reported in one line that names the flag or argument and
// the value at fault, with the nearest command, flag or table when one is
// close; the usage is printed only when asked for (help, -h, --help) or
// when no command is given.
//
// With --json, output is JSON with snake_case keys on stdout, and every
// error is one JSON object on stderr:
//
//	{"error":{"code":"not_found","exit_code":4,"message":"…"}}
//
// Exit codes, one per outcome:
//
//	0 ok          done (also --dry-run, help and -h)
//	1 failed      the database failed, the table is missing, or something unexpected
//	2 usage       bad command, flag or argument
//	3 unconfirmed the command changes data and --yes was not given; nothing changed
//	4 not_found   no such record or consumer
//	5 conflict    the record or consumer is not in a state that allows it (requeue of a record that is not dead, add of a consumer that exists)
//	6 timeout     a database operation took longer than --timeout
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Exit codes, for scripts: one per outcome. exitNames are their names
// in JSON errors.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnconfirmed = 3
	exitNotFound    = 4
	exitConflict    = 5
	exitTimeout     = 6
)

// exitCodes documents each exit code: its name (the code of a JSON
// error) and its meaning.
var exitCodes = []struct{ name, meaning string }{
	exitOK:          {"ok", "done (also --dry-run and help)"},
	exitFailed:      {"failed", "the database failed, the table is missing, or something unexpected"},
	exitUsage:       {"usage", "bad command, flag or argument"},
	exitUnconfirmed: {"unconfirmed", "the command changes data and --yes was not given: nothing changed"},
	exitNotFound:    {"not_found", "no such record or consumer"},
	exitConflict:    {"conflict", "not in a state that allows it: requeue of a record that is not dead, add of a consumer that exists"},
	exitTimeout:     {"timeout", "a database operation took longer than --timeout"},
}

// exitName is the name of exit code code.
func exitName(code int) string { return exitCodes[code].name }

// exitCodesText documents the exit codes in usage texts.
func exitCodesText() string {
	var b strings.Builder
	b.WriteString("exit codes (and the code of a JSON error):\n")
	for code, e := range exitCodes {
		fmt.Fprintf(&b, "  %d %-12s %s\n", code, e.name, e.meaning)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// command is one subcommand.
type command struct {
	summary string
	run     func(c *cli, args []string) int
}

var commands = map[string]command{
	"stats":     {"the backlog: pending, leased, dead, oldest pending age, counts by type", runStats},
	"list":      {"records by status, type and key, a page at a time", runList},
	"show":      {"one record by event ID, its payload shown safely", runShow},
	"requeue":   {"give dead letters a fresh start: one ID, or a filter", runRequeue},
	"purge":     {"delete published records older than --older-than that every consumer is done with (retention)", runPurge},
	"consumers": {"list, add (--from now|beginning) and remove the named consumers of the table", runConsumers},
	"version":   {"the build: module version, VCS revision and Go version", runVersion},
	"schema":    {"print the SQL of the schema (--from/--to VERSION), for a migration tool or a DBA; needs no database", runSchema},
	"ui":        {"serve the operator's dashboard (outboxui) on loopback: overview, dead letters, requeue; stops on Ctrl-C", runUI},
	"migrate":   {"create or upgrade the tables to the current schema version (what Store.Migrate does)", runMigrate},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its streams and exit code, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{out: stdout, errOut: stderr, json: wantsJSON(args)}
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help":
		usage(stdout)
		return exitOK
	case "help":
		return runHelp(c, args[1:])
	}
	cmd, ok := commands[args[0]]
	if !ok {
		return c.usageError("%s", unknownCommand(args))
	}
	c.name, c.summary = args[0], cmd.summary
	return cmd.run(c, args[1:])
}

// runHelp prints the global usage, or one command's usage, on stdout.
func runHelp(c *cli, args []string) int {
	c.name = "help"
	var names []string
	for _, a := range args {
		if !isJSONFlag(a) {
			names = append(names, a)
		}
	}
	switch {
	case len(names) == 0:
		usage(c.out)
		return exitOK
	case len(names) > 1:
		return c.extraArgs("help takes one command name", names, nil)
	}
	cmd, ok := commands[names[0]]
	if !ok {
		return c.usageError("%s", unknownCommand(names))
	}
	c.name, c.summary = names[0], cmd.summary
	return cmd.run(c, []string{"-h"})
}

// unknownCommand is the error for args, whose first is no command: one
// line with the nearest command, or, for a flag given before the
// command, where flags go.
func unknownCommand(args []string) string {
	got := args[0]
	if strings.HasPrefix(got, "-") {
		// Only the flag's name: its value may be a DSN.
		flagName, _, _ := strings.Cut(got, "=")
		for _, a := range args[1:] {
			if _, ok := commands[a]; ok {
				return fmt.Sprintf("flags go after the command: outboxctl %s %s … (run outboxctl help %s)", a, safe(flagName, false), a)
			}
		}
		return fmt.Sprintf("unknown command %q: give a command first, flags after it (run outboxctl help for the commands)", safe(flagName, false))
	}
	names := []string{"help"}
	for n := range commands {
		names = append(names, n)
	}
	return fmt.Sprintf("unknown command %s%s (run outboxctl help for the commands)", argText(got), didYouMean(got, "", names))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: outboxctl <command> [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-9s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-9s %s\n", "help", "a command's usage and flags: outboxctl help <command>")
	fmt.Fprintf(w, "\nflags of every command that reads the database: --dsn (or OUTBOXCTL_DSN, MYSQL_DSN, DATABASE_URL), --driver (or %s; else the DSN's form tells),\n", driverEnv)
	fmt.Fprintf(w, "  --table (or %s, then %s),", tableEnv, defaultTable)
	fmt.Fprintf(w, " --timeout (default %v, for each database operation), --json (JSON output; errors as JSON on stderr)\n", defaultTimeout)
	fmt.Fprintln(w, "durations (--older-than, --timeout): "+durationHelp)
	fmt.Fprintln(w, "requeue, purge and consumers add/remove change data only with --yes; --dry-run shows what they would do")
	fmt.Fprintln(w, exitCodesText())
	fmt.Fprintf(w, "run %q or %q for a command's flags\n", "outboxctl help <command>", "outboxctl <command> -h")
}
