package dsnsafe

import (
	"context"
	"errors"
	"fmt"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// TestParseNeverQuotesTheDSN: the driver's parse errors can quote the
// DSN (with a "/" in the password and no database, the part before the
// "/" as a network name); ours never do, and still say what is wrong.
func TestParseNeverQuotesTheDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"app:Hunter2x/Tail9y@tcp(db:3306)", "does not parse: the form is"},
		{"app:Hunter2x/Tail9y@Other@tcp(db:3306)", "does not parse: the form is"},
		{"app:Hunter2x/Tail%zz9y@tcp(db:3306)", "does not parse: the form is"},
		{"app:Hunter2x@tcp(db:3306", "does not parse (missing the slash separating the database name)"},
		{"app:Hunter2x@tcp(db:3306/rooms", "does not parse (network address not terminated (missing closing brace))"},
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

func TestErrHidesThePasswordFromUnwrapToo(t *testing.T) {
	base := fmt.Errorf("dial app:Hunter2x@db: %w", context.DeadlineExceeded)
	err := Err(fmt.Errorf("wrapped: %w", base), "Hunter2x")
	require.Equal(t, "wrapped: dial app:"+Redacted+"@db: context deadline exceeded", err.Error())
	require.ErrorIs(t, err, context.DeadlineExceeded, "sentinels still match")
	require.Nil(t, errors.Unwrap(err), "the original, with the password, is not handed out")
	var me *mysqldrv.MySQLError
	require.False(t, errors.As(err, &me))
	require.Same(t, base, Err(base, ""), "no password, nothing to redact")
	require.Same(t, base, Err(base, "absent"), "nothing to redact")
	require.NoError(t, Err(nil, "x"))
}
