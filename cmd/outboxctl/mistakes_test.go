package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The mistakes a new user made (issue 29): each error names the actual
// mistake, in one line, with a suggestion where one is close.

// requireOneLine checks that a usage error is one line that names what
// is wrong, without the usage text after it.
func requireOneLine(t *testing.T, r result, args []string) {
	t.Helper()
	require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	require.Equal(t, 1, strings.Count(r.stderr, "\n"), "%v: one line, not the usage:\n%s", args, r.stderr)
	require.NotContains(t, r.stderr, "usage:", args)
}

// TestMistypedFlagSuggestsTheNearest: a typo printed 40 lines of usage
// after the error, with no suggestion. Now one line: the flag, the
// nearest one when it is close, and where the usage is.
func TestMistypedFlagSuggestsTheNearest(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		args       []string
		want, hint string
	}{
		{[]string{"stats", "--tabel", "room_outbox"}, "unknown flag --tabel; did you mean --table?", "run outboxctl help stats"},
		{[]string{"list", "--limt", "5"}, "unknown flag --limt; did you mean --limit?", "run outboxctl help list"},
		{[]string{"requeue", "--olderthan", "1h"}, "unknown flag --olderthan; did you mean --older-than?", "run outboxctl help requeue"},
		{[]string{"requeue", "--error", "x"}, "unknown flag --error; did you mean --error-contains?", "run outboxctl help requeue"},
		{[]string{"purge", "--dryrun"}, "unknown flag --dryrun; did you mean --dry-run?", "run outboxctl help purge"},
		{[]string{"list", "--limit", "x"}, `--limit "x": not a whole number`, "run outboxctl help list"},
		{[]string{"list", "--table"}, "--table needs a value", "run outboxctl help list"},
	} {
		r := ctl(t, f.env, tc.args...)
		requireOneLine(t, r, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
		require.Contains(t, r.stderr, tc.hint, tc.args)
	}
	// Nothing close: no suggestion, rather than a wrong one.
	for _, args := range [][]string{{"stats", "--frobnicate"}, {"list", "--yes"}, {"show", "--x", "p-1"}} {
		r := ctl(t, f.env, args...)
		requireOneLine(t, r, args)
		require.Contains(t, r.stderr, "unknown flag "+args[1], args)
		require.NotContains(t, r.stderr, "did you mean", args)
	}
	// The same in JSON.
	r := ctl(t, f.env, "stats", "--tabel", "room_outbox", "--json")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, readJSONError(t, r).Message, "did you mean --table?")
}

// TestUnknownCommandSuggestsTheNearest: one line, the nearest command
// when it is close; the usage only when asked for.
func TestUnknownCommandSuggestsTheNearest(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"stuts"}, `unknown command "stuts"; did you mean stats?`},
		{[]string{"consumer", "list"}, `unknown command "consumer"; did you mean consumers?`},
		{[]string{"requeu", "d-1"}, `unknown command "requeu"; did you mean requeue?`},
		{[]string{"help", "lsit"}, `unknown command "lsit"; did you mean list?`},
		{[]string{"--table", "room_outbox", "stats"}, "flags go after the command: outboxctl stats --table … (run outboxctl help stats)"},
	} {
		r := ctl(t, nil, tc.args...)
		requireOneLine(t, r, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
	r := ctl(t, nil, "frobnicate")
	requireOneLine(t, r, []string{"frobnicate"})
	require.Contains(t, r.stderr, `unknown command "frobnicate" (run outboxctl help for the commands)`)

	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		r := ctl(t, nil, args...)
		require.Equal(t, exitOK, r.code, args)
		require.Contains(t, r.stdout, "usage: outboxctl <command>", args)
	}
}
