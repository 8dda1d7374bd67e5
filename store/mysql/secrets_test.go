package mysql_test

import (
	"context"
	"database/sql"
	"regexp"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// TestStoreErrorsNeverShowThePassword (issue 37): a service opens its
// pool itself, so the store never sees the DSN; what go-sql-driver/mysql
// reports when a password is refused names the user and host, never the
// password, and the store's errors add nothing to it. Every hostile
// password (the test server's root has none, so every other one is
// refused), through every call.
func TestStoreErrorsNeverShowThePassword(t *testing.T) {
	d := testutil.NewDatabase(t)
	server, err := mysqldrv.ParseDSN(testutil.ServerDSN(t))
	require.NoError(t, err)
	form := testutil.MySQLDSNForm(server.User, server.Addr, d.Name)
	for _, pw := range testutil.HostilePasswords {
		if pw.Password == server.Passwd {
			continue
		}
		db, err := sql.Open("mysql", form.DSN(pw.Password))
		require.NoError(t, err, pw.Name)
		s, err := mysql.New(db, mysql.Options{Table: "room_outbox"})
		require.NoError(t, err, pw.Name)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, claimErr := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Minute})
		_, statsErr := s.Stats(ctx)
		for _, err := range []error{
			s.Migrate(ctx),
			s.Enqueue(ctx, db, nil, outbox.Message{ID: "m-1", Type: "T"}),
			claimErr, statsErr,
		} {
			require.ErrorContains(t, err, "Access denied", pw.Name)
			// The server's message names the user and the host the
			// connection came from (127.0.0.1, or the Docker bridge's
			// 172.17.0.1 for a container), which may share pieces with a
			// password such as "127.0.0.1"; they are not the password.
			testutil.RequireNoPasswordFragments(t, err.Error(), pw.Password, append([]string{form.DSN("")}, deniedAs(err)...)...)
		}
		cancel()
		require.NoError(t, db.Close())
	}
}

// deniedAs is the user and the client host of a server's "Access denied
// for user 'USER'@'HOST'" in err.
func deniedAs(err error) []string {
	m := regexp.MustCompile(`for user '([^']*)'@'([^']*)'`).FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	return m[1:]
}
