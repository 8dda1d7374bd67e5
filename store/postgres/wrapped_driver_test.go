package postgres_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// A pool on a driver that wraps pgx's, as tracing and logging drivers
// do, claims and settles as one on pgx's own: the fast claim, which
// reads through the pgx connection under a pool's connection when it is
// pgx's, goes database/sql's way on any other. It refused such a pool
// ("not on pgx's stdlib driver") when it first read through pgx.
func TestAStoreOnADriverThatWrapsPgx(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	db := sql.OpenDB(wrappedConnector{dsn: d.DSN})
	t.Cleanup(func() { db.Close() })
	s, err := postgres.New(db, postgres.Options{Table: testTable})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Enqueue(ctx, db, nil,
		outbox.Message{ID: "a", Type: "T", Payload: []byte("1")}, outbox.Message{ID: "b", Type: "T", Payload: []byte("2")},
		outbox.Message{ID: "c", Type: "T", Payload: []byte("3")}))
	p := backend.ClaimParams{Owner: "w", Limit: 2, LeaseFor: time.Minute}
	b, err := s.Claim(ctx, p)
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, batchIDs(b))
	require.Equal(t, "1", string(b.Records[0].Payload))
	res, b, err := s.SettleAndClaim(ctx, backend.Settlement{Token: b.Token, Outcomes: []backend.Outcome{
		{ID: "a", Seq: b.Records[0].Seq, Kind: backend.OutcomePublished}, {ID: "b", Seq: b.Records[1].Seq, Kind: backend.OutcomePublished}}}, p)
	require.NoError(t, err)
	require.Equal(t, 2, res.Applied)
	require.Equal(t, []string{"c"}, batchIDs(b))
}

func batchIDs(b backend.Batch) []string {
	var out []string
	for _, r := range b.Records {
		out = append(out, r.ID)
	}
	return out
}

// wrappedConnector opens pgx's stdlib connections inside wrappedConn.
type wrappedConnector struct{ dsn string }

func (c wrappedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := stdlib.GetDefaultDriver().Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return wrappedConn{conn}, nil
}

func (c wrappedConnector) Driver() driver.Driver { return stdlib.GetDefaultDriver() }

// wrappedConn passes everything to pgx's connection, as a tracing
// driver's connection does, without being it.
type wrappedConn struct{ driver.Conn }

func (c wrappedConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

func (c wrappedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c wrappedConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c wrappedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c wrappedConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}
