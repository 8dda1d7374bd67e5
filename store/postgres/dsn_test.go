package postgres_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// TestCheckDSNMeansWhatPgxReads (issue 37): every hostile password, in
// every form of DSN: CheckDSN refuses the DSNs pgx would read otherwise
// than written, with an error that shows none of the password, and pgx
// reads each DSN it accepts with exactly the password, user, host, port
// and database written.
func TestCheckDSNMeansWhatPgxReads(t *testing.T) {
	for _, f := range testutil.PostgresDSNForms("app", "db.example:5433", "rooms") {
		for _, pw := range testutil.HostilePasswords {
			name := f.Name + ", " + pw.Name
			dsn := f.DSN(pw.Password)
			err := postgres.CheckDSN(dsn)
			require.Equal(t, f.Refused(pw.Password), err != nil, "%s: %v", name, err)
			if err != nil {
				require.ErrorIs(t, err, postgres.ErrAmbiguousDSN, name)
				require.ErrorContains(t, err, "postgres store: the DSN does not parse unambiguously (", name)
				testutil.RequireNoPasswordFragments(t, err.Error(), pw.Password)
				continue
			}
			cfg, err := pgx.ParseConfig(dsn)
			require.NoError(t, err, name)
			require.Equal(t, pw.Password, cfg.Password, name)
			require.Equal(t, []any{"app", "db.example", uint16(5433), "rooms"}, []any{cfg.User, cfg.Host, cfg.Port, cfg.Database}, name)
		}
	}
}

// FuzzCheckDSNAgreesWithTheURLStandard: a URL that CheckDSN accepts
// means the same user, password and database to pgx (libpq's reading)
// as to net/url (RFC 3986's), so that no reader of it is misled about
// which part is the password.
func FuzzCheckDSNAgreesWithTheURLStandard(f *testing.F) {
	for _, s := range []string{
		"postgres://app:S3cret@db:5432/rooms", "postgres://app:p%40ss%23w0rd@db/rooms?sslmode=disable",
		"postgres://app:p@ss#w0rd@db/rooms", "postgres://USER:/S3cret@db/rooms", "postgresql://a:b:c@d/e",
		"postgres://app:it's(ok)!*+,;=&$~@db/rooms", "postgres://:@/?password=x%26y", "postgres://a@b/c?password=x+y",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		if !strings.HasPrefix(dsn, "postgres") || postgres.CheckDSN(dsn) != nil {
			return
		}
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil || !strings.Contains(dsn, "://") {
			return // a value pgx refuses (a bad sslmode, say); or the key=value form
		}
		u, err := url.Parse(dsn)
		if err != nil {
			return // the host lists of libpq, which RFC 3986 lacks
		}
		password, _ := u.User.Password()
		if q := u.Query().Get("password"); q != "" {
			password = q
		}
		if u.User != nil && u.User.Username() != "" && u.User.Username() != cfg.User {
			t.Fatalf("%q: pgx reads user %q, net/url %q", dsn, cfg.User, u.User.Username())
		}
		if password != "" && password != cfg.Password {
			t.Fatalf("%q: pgx reads password %q, net/url %q", dsn, cfg.Password, password)
		}
		if db := strings.TrimPrefix(u.Path, "/"); db != "" && db != cfg.Database {
			t.Fatalf("%q: pgx reads database %q, net/url %q", dsn, cfg.Database, db)
		}
	})
}
