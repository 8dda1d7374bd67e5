// Command outboxctl inspects and repairs an outbox table in MySQL or
// MariaDB, so that operators need not write SQL by hand.
//
//	outboxctl stats                         the backlog: pending, leased, dead, oldest pending age, by type; per named consumer
//	outboxctl list [--status S] [--type T] [--key K] [--limit N] [--after SEQ]
//	outboxctl show ID [--consumer NAME]     one record, its payload shown safely
//	outboxctl requeue ID | --type/--key/--older-than/--error-contains/--all  [--consumer NAME]
//	outboxctl purge --older-than DURATION   delete published records every consumer is done with (retention)
//	outboxctl consumers [list] | add NAME --from now|beginning | remove NAME
//
// Every command takes --dsn (or OUTBOXCTL_DSN, then MYSQL_DSN; usage and
// errors never show a DSN's password), --table
// (default "outbox") and --json. requeue, purge, consumers add and
// consumers remove change data: without
// --yes they only show what they would do (and exit 3); --dry-run does the
// same and exits 0.
//
// Exit codes: 0 done; 1 failed (database, missing table, record not
// dead); 2 bad usage; 3 not confirmed (add --yes); 4 no such record.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// Exit codes, for scripts.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitUnconfirmed = 3
	exitNotFound    = 4
)

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
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main with its streams and exit code, for tests.
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{out: stdout, errOut: stderr}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "outboxctl: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	c.name = args[0]
	return cmd.run(c, args[1:])
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
	fmt.Fprintln(w, "\nflags of every command: --dsn (or OUTBOXCTL_DSN, MYSQL_DSN), --table (default outbox), --json")
	fmt.Fprintln(w, "requeue, purge and consumers add/remove change data only with --yes; --dry-run shows what they would do")
	fmt.Fprintln(w, "exit codes: 0 done, 1 failed, 2 bad usage, 3 not confirmed (add --yes), 4 no such record")
	fmt.Fprintf(w, "run %q for a command's flags\n", "outboxctl <command> -h")
}
