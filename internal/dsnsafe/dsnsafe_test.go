package dsnsafe

import (
	"context"
	"errors"
	"fmt"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// TestParseNeverQuotesTheDSN: the driver's parse errors can quote the
// DSN (with a "/" in the password and no database, the part before the
// "/" as a network name); ours never do, and still say what is wrong.
func TestParseNeverQuotesTheDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"app:Hunter2x/Tail9y@tcp(db:3306)", "does not parse unambiguously (an \"@\" after the last \"/\""},
		{"app:Hunter2x/Tail9y@Other@tcp(db:3306)", "does not parse unambiguously (an \"@\" after the last \"/\""},
		{"app:Hunter2x/Tail%zz9y@tcp(db:3306)", "does not parse unambiguously (an \"@\" after the last \"/\""},
		{"app:Hunter2x@tcp(db:3306", "does not parse (missing the slash separating the database name)"},
		{"app:Hunter2x@tcp(db:3306/rooms", "does not parse (network address not terminated (missing closing brace))"},
		{"app:Hunter2x@Tail9y/rooms", "does not parse: the form is"},
	} {
		_, driverErr := mysqldrv.ParseDSN(tc.dsn)
		require.Error(t, driverErr, tc.dsn)
		_, err := Parse(tc.dsn)
		require.ErrorContains(t, err, tc.want, tc.dsn)
		require.NotContains(t, err.Error(), "Hunter2x", tc.dsn)
		require.NotContains(t, err.Error(), "Tail", tc.dsn)
	}

	const pw = "Hunter2x/Tail9y@Other"
	for _, dsn := range []string{
		"app:" + pw + "@tcp(db:3306)",       // no database: the driver splits at the "/"
		"app:" + pw + "@tcp(db:3306/rooms",  // unterminated address
		"app:" + pw + "@tcp(db:3306)/r?x=%", // bad parameter
		"app:" + pw + "@unix(/tmp/\x00)/r?tls=nosuchconfig",
	} {
		_, err := Parse(dsn)
		require.Error(t, err, dsn)
		require.NotContains(t, err.Error(), "Hunter2x", dsn)
		require.NotContains(t, err.Error(), "Tail9y", dsn)
		require.Contains(t, err.Error(), Form)
	}
	cfg, err := Parse("app:" + pw + "@tcp(db:3306)/rooms")
	require.NoError(t, err)
	require.Equal(t, pw, cfg.Passwd)
	require.Equal(t, "app@tcp(db:3306)/rooms", Target(cfg))
}

// TestParseRefusesWhatTheDriverReadsOtherwise (issue 37): DSNs that the
// driver parses, into a database, user or password other than meant.
func TestParseRefusesWhatTheDriverReadsOtherwise(t *testing.T) {
	for _, tc := range []struct{ name, dsn, want string }{
		// The database was forgotten: the driver takes the password up
		// to its "@" and its tail for the database, "Wk3j@tcp(db:3306)".
		{"an @ after the last /", "app:Zq8v@tcp(db:3306)/Wk3j@tcp(db:3306)", `an "@" after the last "/"`},
		{"an @ in a parameter", "app:Zq8v@tcp(db:3306)/rooms?x=Wk3j@y", `an "@" after the last "/"`},
		// The driver takes "mysql" for the user, "//app:Zq8v" for the
		// password (a refused connect would show neither; a URL with a
		// network would connect as "mysql").
		{"a URL", "mysql://app:Zq8v@tcp(db:3306)/rooms", "a URL"},
		{"a URL, MariaDB", "mariadb://app:Zq8v@tcp(db:3306)/rooms", "a URL"},
		// A PostgreSQL key=value DSN: the driver takes all before the "@"
		// for the user, password included.
		{"key=value", "host=db password=Zq8v@tcp(db:3306)/rooms", `its user holds a space, a control character or "="`},
	} {
		_, err := mysqldrv.ParseDSN(tc.dsn)
		require.NoError(t, err, "%s: the driver takes it", tc.name)
		_, err = Parse(tc.dsn)
		require.ErrorIs(t, err, ErrAmbiguous, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.NotContains(t, err.Error(), "Zq8v", tc.name)
		require.NotContains(t, err.Error(), "Wk3j", tc.name)
	}
	for _, dsn := range []string{
		"app:a@b/c:d?e@tcp(db:3306)/rooms?parseTime=true",
		"app:pa://ss@tcp(db:3306)/rooms",
		"app:@tcp(db:3306)/ro%40oms",
		"app@unix(/var/run/mysqld/mysqld.sock)/rooms",
		"app:x@/rooms",
	} {
		_, err := Parse(dsn)
		require.NoError(t, err, dsn)
	}
}

// TestHideLeavesTheTextOutWhole: the old redactor replaced the password
// wherever it stood in the text, so a password "root" or "p" turned the
// user and the host into "[redacted]"; Hide shows such a text as it is,
// and leaves out a text with a piece of the password whole.
func TestHideLeavesTheTextOutWhole(t *testing.T) {
	cfg, err := Parse("root:root@tcp(127.0.0.1:3306)/rooms")
	require.NoError(t, err)
	denied := errors.New("Error 1045 (28000): Access denied for user 'root'@'127.0.0.1' (using password: YES)")
	require.Same(t, denied, Hide(denied, cfg), "the user is shown for what it is")
	cfg.Passwd = "p"
	require.Same(t, denied, Hide(denied, cfg), "a 1-byte password is never looked for")

	cfg.Passwd = "Hunter2x"
	base := fmt.Errorf("dial app:Hunter2x@db: %w", context.DeadlineExceeded)
	err = Hide(fmt.Errorf("wrapped: %w", base), cfg)
	require.EqualError(t, err, secretfmt.Hidden)
	require.ErrorIs(t, err, context.DeadlineExceeded, "sentinels still match")
	require.Nil(t, errors.Unwrap(err), "the original, with the password, is not handed out")
	var me *mysqldrv.MySQLError
	require.False(t, errors.As(err, &me))
	require.NoError(t, Hide(nil, cfg))
}
