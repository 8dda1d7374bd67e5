package mysql_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strings"
	"sync"
	"testing"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// A fault is what faultyDB does to one statement (or COMMIT) on a real
// server.
type fault int

const (
	faultNone fault = iota
	// faultLoseReply runs the statement, then reports a broken connection,
	// as when the server applied it but the reply never arrived.
	faultLoseReply
	// faultFail fails the statement with a server error before it runs.
	faultFail
)

// errInjected is the server error faultFail reports.
var errInjected = &mysqldrv.MySQLError{Number: 1105, Message: "injected by the test"}

// faultyDB opens a pool on dsn whose statements pass through rule: it
// sees each query text ("COMMIT" for a commit) and says what goes wrong.
// The server is real; only what the client hears is changed.
func faultyDB(t *testing.T, dsn string, rule func(query string) fault) *sql.DB {
	t.Helper()
	cfg, err := mysqldrv.ParseDSN(dsn)
	require.NoError(t, err)
	// The driver then runs statements with arguments itself, rather than
	// asking database/sql to prepare them, so every one passes here.
	cfg.InterpolateParams = true
	base, err := mysqldrv.NewConnector(cfg)
	require.NoError(t, err)
	db := sql.OpenDB(&faultConnector{Connector: base, rule: rule})
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// onceFor returns a rule that injects f into the first statement whose
// text contains every one of parts, and into nothing else.
func onceFor(f fault, parts ...string) func(string) fault {
	var once sync.Once
	return func(query string) fault {
		for _, p := range parts {
			if !strings.Contains(query, p) {
				return faultNone
			}
		}
		hit := faultNone
		once.Do(func() { hit = f })
		return hit
	}
}

type faultConnector struct {
	driver.Connector
	rule func(string) fault
}

func (c *faultConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &faultConn{Conn: conn, rule: c.rule}, nil
}

// faultConn passes everything to the driver's connection, applying the
// rule to statements and commits. After a lost reply it reports itself
// broken, so that the pool drops it as it would a real broken one.
type faultConn struct {
	driver.Conn
	rule   func(string) fault
	broken bool
}

func (c *faultConn) apply(query string, run func() error) error {
	switch c.rule(query) {
	case faultFail:
		return errInjected
	case faultLoseReply:
		if err := run(); err != nil {
			return err
		}
		c.broken = true
		return mysqldrv.ErrInvalidConn
	}
	return run()
}

func (c *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	var res driver.Result
	err := c.apply(query, func() (err error) {
		res, err = c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
		return err
	})
	return res, err
}

func (c *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	var rows driver.Rows
	err := c.apply(query, func() (err error) {
		rows, err = c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
		return err
	})
	return rows, err
}

func (c *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &faultTx{Tx: tx, conn: c}, nil
}

func (c *faultConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

func (c *faultConn) ResetSession(ctx context.Context) error {
	if c.broken {
		return driver.ErrBadConn
	}
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c *faultConn) IsValid() bool {
	return !c.broken && c.Conn.(driver.Validator).IsValid()
}

type faultTx struct {
	driver.Tx
	conn *faultConn
}

func (tx *faultTx) Commit() error { return tx.conn.apply("COMMIT", tx.Tx.Commit) }
