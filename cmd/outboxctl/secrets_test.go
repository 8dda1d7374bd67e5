package main

import (
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestNeverPrintsTheDSNPassword runs outboxctl with a DSN password in the
// environment (OUTBOXCTL_DSN, then MYSQL_DSN) and on the command line, and
// checks that neither usage text nor any error shows it, nor a piece of
// it: the password has a "/" and an "@", as generated ones do.
func TestNeverPrintsTheDSNPassword(t *testing.T) {
	const password = "s3cr3tA/p4ssB@w0rdC"
	server, err := mysqldrv.ParseDSN(testutil.ServerDSN(t))
	require.NoError(t, err)
	var (
		noServer   = "app:" + password + "@tcp(127.0.0.1:1)/outbox_db"
		noDatabase = "app:" + password + "@tcp(127.0.0.1:1)"
		wrongPass  = "nosuchuser:" + password + "@tcp(" + server.Addr + ")/outbox_db"
	)
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"help", []string{"OUTBOXCTL_DSN=" + noServer}, []string{"stats", "-h"}, exitOK, "$OUTBOXCTL_DSN"},
		{"help, MYSQL_DSN", []string{"OUTBOXCTL_DSN=", "MYSQL_DSN=" + noServer}, []string{"list", "--help"}, exitOK, "$MYSQL_DSN"},
		{"bad flag", []string{"OUTBOXCTL_DSN=" + noServer}, []string{"stats", "--no-such-flag"}, exitUsage, "unknown flag --no-such-flag"},
		{"bad flag, MYSQL_DSN", []string{"OUTBOXCTL_DSN=", "MYSQL_DSN=" + noServer}, []string{"purge", "--older-than", "soon"}, exitUsage, `--older-than "soon"`},
		{"DSN as a command", nil, []string{noServer, "stats"}, exitUsage, "unknown command a DSN (app@tcp(127.0.0.1:1)/outbox_db; pass it with --dsn)"},
		{"--dsn before the command", nil, []string{"--dsn=" + noServer, "stats"}, exitUsage, "flags go after the command: outboxctl stats --dsn …"},
		{"DSN as a flag's value", nil, []string{"purge", "--older-than", noServer}, exitUsage, "--older-than a DSN (app@tcp(127.0.0.1:1)/outbox_db; pass it with --dsn)"},
		{"unparsable DSN as a flag's value", nil, []string{"stats", "--timeout", noDatabase}, exitUsage, `--timeout an argument with "@" (not shown`},
		{"no server", []string{"OUTBOXCTL_DSN=" + noServer}, []string{"stats"}, exitFailed, "cannot reach app@tcp(127.0.0.1:1)/outbox_db"},
		{"no server, MYSQL_DSN", []string{"OUTBOXCTL_DSN=", "MYSQL_DSN=" + noServer}, []string{"stats"}, exitFailed, "cannot reach app@tcp(127.0.0.1:1)/outbox_db"},
		{"ui, no server", []string{"OUTBOXCTL_DSN=" + noServer}, []string{"ui"}, exitFailed, "cannot reach app@tcp(127.0.0.1:1)/outbox_db"},
		{"wrong password", []string{"OUTBOXCTL_DSN=" + wrongPass}, []string{"stats"}, exitFailed, "Access denied"},
		{"no database name", []string{"OUTBOXCTL_DSN=" + noDatabase}, []string{"stats"}, exitUsage, "--dsn: does not parse"},
		{"no database name, --dsn", []string{"OUTBOXCTL_DSN=", "MYSQL_DSN="}, []string{"stats", "--dsn", noDatabase}, exitUsage, "--dsn: does not parse"},
		{"empty database name", []string{"OUTBOXCTL_DSN=" + noDatabase + "/"}, []string{"stats"}, exitUsage, "--dsn app@tcp(127.0.0.1:1)/ names no database"},
	}
	for _, tc := range cases {
		r := ctl(t, tc.env, tc.args...)
		out := r.stdout + r.stderr
		for _, piece := range []string{password, "s3cr3tA", "p4ssB", "w0rdC"} {
			require.NotContains(t, out, piece, "%s: the DSN's password is printed:\n%s", tc.name, out)
		}
		require.Equal(t, tc.code, r.code, "%s: %s", tc.name, out)
		require.Contains(t, out, tc.want, tc.name)

		// The same with --json: errors are JSON, still without it.
		r = ctl(t, tc.env, append(tc.args, "--json")...)
		out = r.stdout + r.stderr
		for _, piece := range []string{password, "s3cr3tA", "p4ssB", "w0rdC"} {
			require.NotContains(t, out, piece, "%s, --json: the DSN's password is printed:\n%s", tc.name, out)
		}
		require.Equal(t, tc.code, r.code, "%s, --json: %s", tc.name, out)
		if tc.code != exitOK {
			require.Equal(t, exitName(tc.code), readJSONError(t, r).Code, tc.name)
		}
	}
}
