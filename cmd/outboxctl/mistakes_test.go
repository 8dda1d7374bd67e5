package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	inboxmysql "github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
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

// TestDurationsTakeDaysAndWeeks: "--older-than 1d" said only "parse
// error". Every duration flag takes days and weeks; a bad duration names
// the flag, the value and what is wrong with it.
func TestDurationsTakeDaysAndWeeks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tbl := []string{"--table", "room_outbox"}
	// old-1 and old-2 were published 40 days ago, new-1 just now.
	for value, want := range map[string]string{"1d": "would delete 2 records", "5w": "would delete 2 records",
		"2d12h": "would delete 2 records", "6w": "would delete 0 records", "1w5d": "would delete 2 records"} {
		r := ctl(t, f.env, append([]string{"purge", "--older-than", value, "--dry-run"}, tbl...)...)
		require.Equal(t, exitOK, r.code, "%s: %s", value, r.stderr)
		require.Contains(t, r.stdout, want, value)
	}
	r := ctl(t, f.env, append([]string{"requeue", "--older-than", "1d", "--timeout", "1d", "--dry-run"}, tbl...)...)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "would requeue 0 dead letters", "the dead letters are younger than a day")
	require.Contains(t, ctl(t, nil, "help", "purge").stdout, "1d, 2d12h, 1w", "the usage says so")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"purge", "--older-than", "-1d"}, `--older-than "-1d": must not be negative`},
		{[]string{"purge", "--older-than", "99999999w"}, `--older-than "99999999w": too long: at most 106751d`},
		{[]string{"purge", "--older-than", "1x"}, `--older-than "1x": unknown unit "x": e.g. 90s, 45m, 12h, 1d, 2d12h, 1w`},
		{[]string{"purge", "--older-than", "soon"}, `--older-than "soon": not a duration: e.g. 90s, 45m, 12h, 1d, 2d12h, 1w`},
		{[]string{"requeue", "--older-than", "3"}, `--older-than "3": 3 what? give a unit: e.g. 90s`},
		{[]string{"stats", "--timeout", "-5s"}, `--timeout "-5s": must not be negative`},
	} {
		r := ctl(t, f.env, append(tc.args, tbl...)...)
		requireOneLine(t, r, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}
}

// TestMistypedFlagSuggestsTheNearest: a typo printed 40 lines of usage
// after the error, with no suggestion. Now one line: the flag, the
// nearest one when it is close, and where the usage is.
func TestMistypedFlagSuggestsTheNearest(t *testing.T) {
	t.Parallel()
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
		{[]string{"purge", "--yes=maybe"}, `--yes "maybe": must be true or false`, "run outboxctl help purge"},
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
	t.Parallel()
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

// TestForgottenTableListsTheOutboxTables: forgetting --table said table
// "outbox" does not exist and suggested creating it. The table comes
// from $OUTBOXCTL_TABLE when --table is missing, and a missing table's
// error lists the outbox tables that do exist (not their companions, an
// inbox or other tables).
func TestForgottenTableListsTheOutboxTables(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	orders, err := mysql.New(f.db.DB, mysql.Options{Table: "orders_outbox"})
	require.NoError(t, err)
	require.NoError(t, orders.Migrate(ctx))
	ib, err := inboxmysql.New(f.db.DB, inboxmysql.Options{Consumer: "activity"})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(ctx))
	_, err = f.db.DB.Exec("CREATE TABLE users (id BIGINT PRIMARY KEY, status VARCHAR(16), payload BLOB)")
	require.NoError(t, err)
	env := func(more ...string) []string { return append(append([]string{}, f.env...), more...) }

	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no --table", env(), []string{"stats"},
			`table "outbox" does not exist; outbox tables here: orders_outbox, room_outbox (pass --table or set OUTBOXCTL_TABLE)`},
		{"--table mistyped", env(), []string{"list", "--table", "orders_outbx"},
			`table "orders_outbx" does not exist; outbox tables here: orders_outbox, room_outbox (check --table; did you mean orders_outbox?)`},
		{"$OUTBOXCTL_TABLE mistyped", env("OUTBOXCTL_TABLE=rooms_outbox"), []string{"stats"},
			`table "rooms_outbox" does not exist; outbox tables here: orders_outbox, room_outbox (check $OUTBOXCTL_TABLE; did you mean room_outbox?)`},
		{"a companion table", env(), []string{"stats", "--table", "room_outbox_state"},
			`it was not made by this store; outbox tables here: orders_outbox, room_outbox (check --table)`},
	} {
		r := ctl(t, tc.env, tc.args...)
		require.Equal(t, exitFailed, r.code, "%s: %s", tc.name, r.stderr)
		require.Contains(t, r.stderr, tc.want, tc.name)
		require.NotContains(t, r.stderr, "Migrate", "%s: no advice to create a table", tc.name)
		r = ctl(t, tc.env, append(tc.args, "--json")...)
		require.Equal(t, exitFailed, r.code, "%s: %s", tc.name, r.stderr)
		require.Contains(t, readJSONError(t, r).Message, tc.want, tc.name)
	}

	// The table from the environment, and --table before it.
	r := ctl(t, env("OUTBOXCTL_TABLE=room_outbox"), "stats")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "table room_outbox: 2 pending")
	r = ctl(t, env("OUTBOXCTL_TABLE=room_outbox"), "stats", "--table", "orders_outbox")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "table orders_outbox: 0 pending")
	r = ctl(t, []string{"OUTBOXCTL_TABLE=orders_outbox"}, "schema")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "CREATE TABLE IF NOT EXISTS `orders_outbox`")
	r = ctl(t, []string{"OUTBOXCTL_TABLE=orders_outbox"}, "schema", "--inbox")
	require.Contains(t, r.stdout, "CREATE TABLE IF NOT EXISTS `inbox`", "$OUTBOXCTL_TABLE names an outbox table, not an inbox")
	r = ctl(t, env("OUTBOXCTL_TABLE=bad-name"), "stats")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `$OUTBOXCTL_TABLE: mysql store: Table "bad-name"`)
	r = ctl(t, env("OUTBOXCTL_TABLE=room_outbox"), "stats", "--table", "")
	require.Equal(t, exitUsage, r.code, "an empty --table is a mistake, not the default: %s", r.stderr)
	require.Contains(t, r.stderr, `--table "": give a table name`)
	for _, args := range [][]string{{"help"}, {"help", "stats"}} {
		require.Contains(t, ctl(t, nil, args...).stdout, "OUTBOXCTL_TABLE", "%v documents it", args)
	}

	// migrate without --table warns that it makes a new table.
	r = ctl(t, env(), "migrate")
	require.Equal(t, exitUnconfirmed, r.code, r.stderr)
	require.Contains(t, r.stderr, `neither --table nor $OUTBOXCTL_TABLE given, so the default "outbox": this makes a new table "outbox" beside the outbox tables here, orders_outbox, room_outbox`)
	require.Contains(t, r.stdout, "would bring table outbox from schema version 0")

	// No outbox table at all: the error says where the name came from.
	empty := testutil.NewDatabase(t)
	r = ctl(t, []string{"OUTBOXCTL_DSN=" + empty.DSN}, "stats")
	require.Equal(t, exitFailed, r.code, r.stderr)
	require.Regexp(t, `table "outbox" does not exist in database \S+, nor does any other outbox table `+
		`\(neither --table nor \$OUTBOXCTL_TABLE given, so the default "outbox"\): outboxctl migrate creates it`, r.stderr)
}

// TestArgumentWhereNoneIsTaken: "outboxctl list orders_outbox" said
// "--after must not be negative" though no --after was given. An
// argument where none is taken says so, and suggests --table when it
// names a table.
func TestArgumentWhereNoneIsTaken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "room_outbox"}, `list takes no arguments, got "room_outbox" (to use table room_outbox, pass --table room_outbox)`},
		{[]string{"stats", "room_outbox"}, `stats takes no arguments, got "room_outbox" (to use table room_outbox, pass --table room_outbox)`},
		{[]string{"purge", "room_outbox", "--older-than", "30d"}, `purge takes no arguments, got "room_outbox" (to use table room_outbox, pass --table room_outbox)`},
		{[]string{"show", "room_outbox", "p-1"}, `show takes one event ID, got "room_outbox", "p-1" (to use table room_outbox, pass --table room_outbox)`},
		{[]string{"requeue", "room_outbox", "d-1"}, `requeue takes at most one event ID, got "room_outbox", "d-1" (to use table room_outbox, pass --table room_outbox)`},
		{[]string{"consumers", "room_outbox"}, `consumers takes list, add NAME or remove NAME, got "room_outbox" (to use table room_outbox, pass --table room_outbox)`},
		{[]string{"migrate", "room_outbox"}, `migrate takes no arguments, got "room_outbox" (to use table room_outbox, pass --table room_outbox)`},
		{[]string{"schema", "orders_outbox"}, `schema takes no arguments, got "orders_outbox" (to use table orders_outbox, pass --table orders_outbox)`},
		// Not a table here: no suggestion.
		{[]string{"list", "nope"}, `list takes no arguments, got "nope"`},
		{[]string{"list", "--table", "room_outbox", "nope", "--status", "dead"}, `list takes no arguments, got "nope"`},
		{[]string{"version", "room_outbox"}, `version takes no arguments, got "room_outbox"`},
	} {
		r := ctl(t, f.env, tc.args...)
		requireOneLine(t, r, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
		if !strings.Contains(tc.want, "pass --table") {
			require.NotContains(t, r.stderr, "pass --table", tc.args)
		}
		require.NotContains(t, r.stderr, "--after", tc.args)
	}
	// Without a database to look in, the error stands without a hint.
	r := ctl(t, []string{"OUTBOXCTL_DSN=", "MYSQL_DSN="}, "list", "room_outbox")
	requireOneLine(t, r, []string{"list", "room_outbox"})
	require.Contains(t, r.stderr, `list takes no arguments, got "room_outbox"`)
}

// TestValidationErrorsNameTheFlagAndValue: every validation error names
// the flag (or argument) at fault and its value, not a list of rules
// of which one was broken.
func TestValidationErrorsNameTheFlagAndValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"list", "--after", "-1"}, "--after -1: must not be negative"},
		{[]string{"list", "--status", "ded"}, `--status "ded": must be pending, published or dead; did you mean dead?`},
		{[]string{"list", "--limit", "5000"}, "--limit 5000: must be 1 to 1000"},
		{[]string{"requeue", "--all", "--batch", "0"}, "--batch 0: must be 1 to 10000"},
		{[]string{"requeue", "--all", "--limit", "-2"}, "--limit -2: must not be negative"},
		{[]string{"requeue", "d-1", "--type", "T", "--all"}, `give an event ID or a filter, not both: got "d-1" and --all, --type`},
		{[]string{"purge"}, "--older-than is required"},
		{[]string{"purge", "--older-than", "0"}, "--older-than 0s: must be more than 0"},
		{[]string{"show"}, "show takes an event ID: outboxctl show EVENT_ID"},
		{[]string{"show", "p-1", "--consumer", "bad name"}, `--consumer: mysql store: consumer name "bad name"`},
		{[]string{"consumers", "ad", "x"}, `consumers takes list, add NAME or remove NAME, got "ad"; did you mean add?`},
		{[]string{"consumers", "add"}, "consumers add takes a consumer name"},
		{[]string{"consumers", "remove", "a", "b"}, `consumers remove takes one consumer name, got "a", "b"`},
		{[]string{"consumers", "list", "--from", "now"}, `--from "now": only consumers add takes it, not consumers list`},
		{[]string{"consumers", "add", "x", "--from", "begining"}, `--from "begining": must be now or beginning; did you mean beginning?`},
		{[]string{"schema", "--from", "5", "--to", "3"}, "--from 5: must be 0 (no tables yet) to 3 (--to)"},
		{[]string{"schema", "--to", "99"}, "--to 99: this build knows schema versions 1 to"},
		{[]string{"help", "stats", "list"}, `help takes one command name, got "stats", "list"`},
	} {
		r := ctl(t, f.env, append(tc.args, "--table", "room_outbox")...)
		requireOneLine(t, r, tc.args)
		require.Contains(t, r.stderr, tc.want, tc.args)
	}

	// A DSN from the environment is named as such.
	r := ctl(t, []string{"OUTBOXCTL_DSN=root@tcp(127.0.0.1:1)/"}, "stats")
	requireOneLine(t, r, []string{"stats"})
	require.Contains(t, r.stderr, "--dsn root@tcp(127.0.0.1:1)/ names no database (from $OUTBOXCTL_DSN: --dsn not given)")

	// A consumer that is not there: the nearest that is.
	require.NoError(t, f.store.AddConsumer(context.Background(), "activity", backend.StartNow))
	r = ctl(t, f.env, "consumers", "remove", "activty", "--table", "room_outbox")
	require.Equal(t, exitNotFound, r.code, r.stderr)
	require.Contains(t, r.stderr, `no consumer "activty" of room_outbox; did you mean activity?`)
}
