package roomservice

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// TestConfigNeverPrintsSecrets formats the configuration and each block
// that holds a secret every way a log line or an error might.
func TestConfigNeverPrintsSecrets(t *testing.T) {
	const password, key = "pw-Hunter2/with@odd:chars", "S3CRET-im-key-0123456789"
	var c Config
	c.NodeID = "node-1"
	c.MySQL.DSN = "app:" + password + "@tcp(db:3306)/rooms?parseTime=true"
	c.TencentIM = TencentIMConfig{BaseURL: "https://console.tim.qq.com", SDKAppID: 1400000000, AdminIdentifier: "admin", SecretKey: key}

	var out strings.Builder
	for _, v := range []any{c, &c, c.MySQL, &c.MySQL, c.TencentIM, &c.TencentIM} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
		var text, js bytes.Buffer
		slog.New(slog.NewTextHandler(&text, nil)).Info("config", "cfg", v)
		slog.New(slog.NewJSONHandler(&js, nil)).Info("config", "cfg", v)
		out.WriteString(text.String() + js.String())
	}
	for _, secret := range []string{password, key, "Hunter2"} {
		require.NotContains(t, out.String(), secret)
		hex := fmt.Sprintf("%x", secret)
		require.NotContains(t, out.String(), hex[:min(32, len(hex))])
	}
	require.Contains(t, out.String(), "tcp(db:3306)", "what is not secret is still there")
	require.Contains(t, out.String(), "admin")

	bad := c
	bad.MySQL.DSN = "not a dsn " + password
	require.NotContains(t, fmt.Sprint(bad), password, "a DSN that does not parse is hidden whole")
}

// TestParseDSNNeverQuotesTheDSN: the driver's parse errors can quote the
// DSN (with a "/" in the password and no database, the part before the
// "/" as a network name); ours never do, and still say what is wrong.
func TestParseDSNNeverQuotesTheDSN(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"app:Hunter2x/Tail9y@tcp(db:3306)", "does not parse: the form is"},
		{"app:Hunter2x/Tail9y@Other@tcp(db:3306)", "does not parse: the form is"},
		{"app:Hunter2x/Tail%zz9y@tcp(db:3306)", "does not parse: the form is"},
		{"app:Hunter2x@tcp(db:3306", "does not parse (missing the slash separating the database name)"},
		{"app:Hunter2x@tcp(db:3306/rooms", "does not parse (network address not terminated (missing closing brace))"},
	} {
		_, driverErr := mysqldrv.ParseDSN(tc.dsn)
		require.Error(t, driverErr, tc.dsn)
		_, err := parseDSN(tc.dsn)
		require.ErrorContains(t, err, tc.want, tc.dsn)
		require.NotContains(t, err.Error(), "Hunter2x", tc.dsn)
		require.NotContains(t, err.Error(), "Tail", tc.dsn)
	}
	cfg, err := parseDSN("app:Hunter2x/Tail9y@Other@tcp(db:3306)/rooms")
	require.NoError(t, err)
	require.Equal(t, "Hunter2x/Tail9y@Other", cfg.Passwd, `the "/" before the database lets the password hold "/" and "@"`)
	require.Equal(t, "app@tcp(db:3306)/rooms", dsnTarget(cfg))
}

func TestRedactErr(t *testing.T) {
	base := errors.New("dial: app:Hunter2x@db refused")
	err := redactErr(fmt.Errorf("wrapped: %w", base), "Hunter2x")
	require.Equal(t, "wrapped: dial: app:[redacted]@db refused", err.Error())
	require.ErrorIs(t, err, base, "errors.Is still sees the cause")
	require.Same(t, base, redactErr(base, ""), "no password, nothing to redact")
	require.NoError(t, redactErr(nil, "x"))
}
