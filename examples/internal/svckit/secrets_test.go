package svckit

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// TestMySQLNeverShowsThePassword (issue 37): the services' mysql block,
// with every hostile password, and with DSNs the driver reads otherwise
// than meant: Validate, String (every verb) and Open's errors show no 4
// bytes of the password; errors never cut it out in place (the old
// redactor turned the user "root" into "[redacted]" for the password
// "root"); a DSN the driver would read otherwise is refused.
func TestMySQLNeverShowsThePassword(t *testing.T) {
	d := testutil.NewDatabase(t)
	server, err := mysqldrv.ParseDSN(testutil.ServerDSN(t))
	require.NoError(t, err)
	form := testutil.MySQLDSNForm(server.User, server.Addr, d.Name)
	type dsnCase struct{ name, dsn, password, public string }
	var cases []dsnCase
	for _, pw := range testutil.HostilePasswords {
		if pw.Password != server.Passwd { // every other password is refused by the server
			cases = append(cases, dsnCase{pw.Name, form.DSN(pw.Password), pw.Password, form.DSN("")})
		}
	}
	// The database forgotten: the driver reads the password up to its
	// "@" and the database "Wk3j@tcp(…)".
	forgot := "Zq8v@tcp(" + server.Addr + ")/Wk3j"
	cases = append(cases, dsnCase{"no database, a password with @ and /",
		server.User + ":" + forgot + "@tcp(" + server.Addr + ")", forgot, server.User + "@tcp(" + server.Addr + ")/"})

	for _, c := range cases {
		m := MySQL{DSN: c.dsn}.WithDefaults(2, 2)
		m.StartupTimeout = 200 * time.Millisecond
		shown := fmt.Sprintf("%v %+v %#v %s %q %x", m, m, m, m, m, m) + m.LogValue().String()
		testutil.RequireNoPasswordFragments(t, shown, c.password, c.public)

		err := m.Validate()
		if err == nil {
			_, err = m.Open(context.Background())
		}
		require.Error(t, err, c.name)
		testutil.RequireNoPasswordFragments(t, err.Error(), c.password, c.public)
		require.NotContains(t, err.Error(), "[redacted]", "%s: nothing is cut out of an error in place: %v", c.name, err)
	}
}
