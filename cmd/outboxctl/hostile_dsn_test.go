package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/store/mysql"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// missingDB is a database that does not exist, to provoke an error after
// the DSN parsed.
const missingDB = "ort_no_such_database"

// connecting are the commands that connect, each with --json, for the
// run against missingDB: every path that reaches the database.
var connecting = [][]string{
	{"stats"}, {"list"}, {"show", "p-1"}, {"requeue", "--all"}, {"purge", "--older-than", "1d"},
	{"consumers"}, {"migrate"}, {"ui"},
}

// hostileForm is a DSN form on the test servers: the form on the
// database with the outbox table, and on missingDB.
type hostileForm struct {
	on, onMissing testutil.DSNForm
	// target is how outboxctl names missingDB's DSN.
	target string
	// okCode is the exit code of stats when the DSN is taken: the
	// PostgreSQL server trusts every password; MariaDB's root has none.
	okCode func(password string) int
}

// TestHostileDSNPasswordsNeverShown (issue 37): outboxctl printed pieces
// of a password that its DSN parser read otherwise than meant (a
// PostgreSQL URL with a raw "/", "@" or "#" in the password), and its
// redactor, searching the text for what the parser took for the
// password, replaced every "p" of the output for the password "p". For
// every password of testutil.HostilePasswords, in every form of DSN:
// a DSN that does not parse unambiguously is refused with an error that
// says how to write it; one that parses connects (stats exits 0 where the
// server takes the password), and on a database that does not exist
// every connecting command fails naming the DSN's user, address and
// database unchanged; and no output, text or --json, shows 4 bytes of
// the password.
func TestHostileDSNPasswordsNeverShown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgDB := pgtest.NewDatabase(t)
	pgStore, err := postgres.New(pgDB.DB, postgres.Options{Table: "room_outbox"})
	require.NoError(t, err)
	require.NoError(t, pgStore.Migrate(ctx))
	server, err := pgx.ParseConfig(pgtest.ServerDSN(t))
	require.NoError(t, err)
	pgHost := fmt.Sprintf("%s:%d", server.Host, server.Port)

	myDB := testutil.NewDatabase(t)
	myStore, err := mysql.New(myDB.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(t, err)
	require.NoError(t, myStore.Migrate(ctx))
	myServer, err := mysqldrv.ParseDSN(testutil.ServerDSN(t))
	require.NoError(t, err)
	require.Empty(t, myServer.Passwd, "the test server's root has no password, so that every other is wrong")

	var forms []hostileForm
	pgOn := testutil.PostgresDSNForms(server.User, pgHost, pgDB.Name)
	for i, f := range testutil.PostgresDSNForms(server.User, pgHost, missingDB) {
		forms = append(forms, hostileForm{on: pgOn[i], onMissing: f,
			target: server.User + "@" + pgHost + "/" + missingDB, okCode: func(string) int { return exitOK }})
	}
	forms = append(forms, hostileForm{
		on:        testutil.MySQLDSNForm(myServer.User, myServer.Addr, myDB.Name),
		onMissing: testutil.MySQLDSNForm(myServer.User, myServer.Addr, missingDB),
		target:    myServer.User + "@tcp(" + myServer.Addr + ")/" + missingDB,
		okCode: func(pw string) int {
			if pw == "" {
				return exitOK
			}
			return exitFailed // Access denied
		},
	})

	for fi, f := range forms {
		t.Run(f.on.Name, func(t *testing.T) {
			for pi, pw := range testutil.HostilePasswords {
				requireHostileDSNHandled(t, f, pw, connecting[(fi+pi)%len(connecting)])
			}
		})
	}
}

// requireHostileDSNHandled runs stats with pw in form f on the database
// with the outbox table, and args with --json on missingDB, and checks
// what they print.
func requireHostileDSNHandled(t *testing.T, f hostileForm, pw testutil.HostilePassword, args []string) {
	t.Helper()
	name := fmt.Sprintf("%s, %s", f.on.Name, pw.Name)
	refused := f.on.Refused(pw.Password)

	r := ctl(t, []string{"OUTBOXCTL_DSN=" + f.on.DSN(pw.Password), "OUTBOXCTL_TABLE=room_outbox"}, "stats")
	requireNoPassword(t, name, r, pw.Password, f.on.DSN(""))
	if refused {
		require.Equal(t, exitUsage, r.code, "%s: %s", name, r.stderr)
		require.Contains(t, r.stderr, "does not parse unambiguously", name)
	} else {
		require.Equal(t, f.okCode(pw.Password), r.code, "%s: %s", name, r.stderr)
	}

	args = append(append([]string{}, args...), "--json")
	r = ctl(t, []string{"OUTBOXCTL_DSN=" + f.onMissing.DSN(pw.Password), "OUTBOXCTL_TABLE=room_outbox"}, args...)
	requireNoPassword(t, name+", "+args[0], r, pw.Password, f.onMissing.DSN(""))
	msg := readJSONError(t, r).Message
	if refused {
		require.Equal(t, exitUsage, r.code, "%s, %v: %s", name, args, r.stderr)
		require.Contains(t, msg, "does not parse unambiguously", name)
		return
	}
	require.Equal(t, exitFailed, r.code, "%s, %v: %s", name, args, r.stderr)
	require.Contains(t, msg, "cannot reach "+f.target+": ", "%s: the target, unchanged", name)
}

// requireNoPassword checks that r shows no piece of password, and that
// nothing was cut out of it in place ("[redacted]"), which could only
// mangle what is left around it.
func requireNoPassword(t *testing.T, name string, r result, password string, public ...string) {
	t.Helper()
	out := r.stdout + r.stderr
	testutil.RequireNoPasswordFragments(t, out, password, public...)
	require.NotContains(t, out, "[redacted]", "%s: nothing is cut out of a text in place:\n%s", name, out)
}

// TestDSNsReadOtherwiseThanMeantAreRefused (issue 37): the DSNs of the
// issue, and their MySQL counterparts, each refused with a message that
// says how to write it, and shows none of it.
func TestDSNsReadOtherwiseThanMeantAreRefused(t *testing.T) {
	t.Parallel()
	server, err := pgx.ParseConfig(pgtest.ServerDSN(t))
	require.NoError(t, err)
	pgHost := fmt.Sprintf("%s:%d", server.Host, server.Port)
	myServer, err := mysqldrv.ParseDSN(testutil.ServerDSN(t))
	require.NoError(t, err)
	for _, tc := range []struct {
		name, dsn, password string
		args                []string
		want                string
	}{
		// pgx takes "postgres" for the host and the password for the
		// database: "cannot reach …/S3cret-pg-PW@…".
		{"a / before the password", "postgres://postgres:/S3cret-pg-PW@" + pgHost + "/rooms", "/S3cret-pg-PW@",
			[]string{"stats"}, `(it holds an "@" after the host, in the database name or the query): percent-encode`},
		{"the same, --json", "postgres://postgres:/S3cret-pg-PW@" + pgHost + "/rooms", "/S3cret-pg-PW@",
			[]string{"list", "--json"}, `percent-encode a "@", ":", "/"`},
		// pgx takes "p" for the password and "ss#w0rd@127.0.0.1" for
		// the host.
		{"@ and #", "postgres://postgres:p@ss#w0rd@" + pgHost + "/rooms", "p@ss#w0rd",
			[]string{"stats"}, `(it holds a "#")`},
		// pgx takes "w0rd@127.0.0.1:5432" for the port.
		{"@ and :", "postgres://postgres:p@ss:w0rd@" + pgHost + "/rooms", "p@ss:w0rd",
			[]string{"stats", "--json"}, `more than one "@"`},
		{"a space in key=value", "host=" + server.Host + " user=postgres password=Xy Zq8v dbname=rooms", "Xy Zq8v",
			[]string{"stats"}, `quote a value that holds a space`},
		{"a split password in key=value", "host=" + server.Host + " user=postgres password=Xy Zq8v=Kw3j dbname=rooms", "Xy Zq8v=Kw3j",
			[]string{"ui"}, `with a password, a key is not a connection keyword`},
		// The driver reads the password up to the first "@" and the
		// database "Wk3j@tcp(…)": the database was forgotten.
		{"MySQL: no database, and the password holds @…/", "root:Zq8v@tcp(" + myServer.Addr + ")/Wk3j@tcp(" + myServer.Addr + ")", "Zq8v@tcp(" + myServer.Addr + ")/Wk3j",
			[]string{"stats"}, `an "@" after the last "/"`},
		{"MySQL: a URL", "mysql://root:Zq8vKw3j@" + myServer.Addr + "/rooms", "Zq8vKw3j",
			[]string{"stats", "--json"}, `a URL, which go-sql-driver/mysql does not take`},
	} {
		for _, env := range []string{"OUTBOXCTL_DSN", "DATABASE_URL"} {
			r := ctl(t, []string{"OUTBOXCTL_DSN=", "MYSQL_DSN=", env + "=" + tc.dsn}, tc.args...)
			requireNoPassword(t, tc.name, r, tc.password, "root@tcp("+myServer.Addr+")/", pgHost)
			require.Equal(t, exitUsage, r.code, "%s: %s", tc.name, r.stderr)
			out := r.stderr
			if strings.Contains(strings.Join(tc.args, " "), "--json") {
				out = readJSONError(t, r).Message
			}
			require.Contains(t, out, tc.want, tc.name)
			require.Contains(t, out, "from $"+env, tc.name)
		}
	}
}

// TestDSNAsAnArgumentIsNotShown: a DSN where another argument goes is
// shown as its user, address and database when it parses, else not at
// all; a PostgreSQL key=value DSN, which has no "@", was quoted whole.
func TestDSNAsAnArgumentIsNotShown(t *testing.T) {
	t.Parallel()
	const pw = "Zq8vKw3j"
	for _, args := range [][]string{
		{"stats", "host=127.0.0.1 user=postgres password=" + pw + " dbname=rooms"},
		{"stats", "--timeout", "password=" + pw + " host=127.0.0.1"},
		{"host=127.0.0.1 password=" + pw, "stats"},
		{"stats", "postgres://postgres:" + pw + "@127.0.0.1/rooms"},
		{"list", "--table", "postgres://postgres:" + pw + "@127.0.0.1/rooms", "--json"},
	} {
		r := ctl(t, []string{"OUTBOXCTL_DSN=", "MYSQL_DSN="}, args...)
		requireNoPassword(t, args[0], r, pw)
		require.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
		require.True(t, json.Valid([]byte(r.stderr)) || !strings.Contains(strings.Join(args, " "), "--json"), r.stderr)
	}
}
