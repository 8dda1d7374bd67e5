package inboxtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// effects is a table of counters the suite's handlers increment through
// the inbox's transaction, one per message ID (keyed by a hash, so that
// any ID is a key of its own), plus shared rows that handlers lock.
// calls counts handler calls per ID, in memory.
type effects struct {
	db *sql.DB
	// param is the statements' one parameter (Harness.Param).
	param string

	mu    sync.Mutex
	calls map[string]int
}

// newEffects creates the effect tables with a zero counter for each id.
func newEffects(t *testing.T, h Harness, ids ...string) *effects {
	t.Helper()
	ctx := context.Background()
	for _, st := range []string{
		"CREATE TABLE inboxtest_effects (k CHAR(64) NOT NULL PRIMARY KEY, n INT NOT NULL)",
		"CREATE TABLE inboxtest_shared (k CHAR(1) NOT NULL PRIMARY KEY, n INT NOT NULL)",
		"INSERT INTO inboxtest_shared (k, n) VALUES ('a', 0), ('b', 0)",
	} {
		_, err := h.DB.ExecContext(ctx, st)
		require.NoError(t, err, st)
	}
	e := &effects{db: h.DB, param: h.Param, calls: map[string]int{}}
	if e.param == "" {
		e.param = "?"
	}
	e.add(t, ids...)
	return e
}

// add adds zero counters for ids.
func (e *effects) add(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		_, err := e.db.ExecContext(context.Background(), e.sql("INSERT INTO inboxtest_effects (k, n) VALUES (?, 0)"), key(id))
		require.NoError(t, err)
	}
}

func key(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// handler returns a handler that counts its call and increments id's
// counter through tx.
func (e *effects) handler(id string) inbox.Handler {
	return func(ctx context.Context, tx *sql.Tx) error {
		e.called(id)
		return e.increment(ctx, tx, id)
	}
}

func (e *effects) called(id string) {
	e.mu.Lock()
	e.calls[id]++
	e.mu.Unlock()
}

// sql returns query, written with one ? parameter, with the database's.
func (e *effects) sql(query string) string { return strings.Replace(query, "?", e.param, 1) }

func (e *effects) increment(ctx context.Context, tx *sql.Tx, id string) error {
	_, err := tx.ExecContext(ctx, e.sql("UPDATE inboxtest_effects SET n = n + 1 WHERE k = ?"), key(id))
	return err
}

// lockShared increments both shared rows, in the order first, then the
// other: handlers that take them in opposite orders deadlock.
func (e *effects) lockShared(ctx context.Context, tx *sql.Tx, first string) error {
	second := map[string]string{"a": "b", "b": "a"}[first]
	for _, k := range []string{first, second} {
		if _, err := tx.ExecContext(ctx, e.sql("UPDATE inboxtest_shared SET n = n + 1 WHERE k = ?"), k); err != nil {
			return err
		}
	}
	return nil
}

// count reads id's counter: how many times its effect committed.
func (e *effects) count(t *testing.T, id string) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.QueryRowContext(context.Background(), e.sql("SELECT n FROM inboxtest_effects WHERE k = ?"), key(id)).Scan(&n))
	return n
}

// shared reads a shared row's counter.
func (e *effects) shared(t *testing.T, k string) int {
	t.Helper()
	var n int
	require.NoError(t, e.db.QueryRowContext(context.Background(), e.sql("SELECT n FROM inboxtest_shared WHERE k = ?"), k).Scan(&n))
	return n
}

// callsOf is how many times a handler of id was called.
func (e *effects) callsOf(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[id]
}

// contains asks the inbox whether it has a record of id.
func contains(t *testing.T, ib inbox.Inbox, id string) bool {
	t.Helper()
	in, ok := ib.(Inspector)
	require.True(t, ok, "%T does not implement inboxtest.Inspector", ib)
	got, err := in.Contains(context.Background(), id)
	require.NoError(t, err)
	return got
}

// messageIDs returns n distinct message IDs, in order.
func messageIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("evt-%03d", i)
	}
	return ids
}
