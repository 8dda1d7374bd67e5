package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// TestClaimHeadsRechecksTheHead: an ordered claim reads the key heads
// without locks, then locks the ones it takes. A requeue that commits in
// between makes an older record of the key pending again; the record read
// as the head is then no longer the head and must not be claimed, or two
// records of the key would be in flight.
func TestClaimHeadsRechecksTheHead(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s, err := New(d.DB, Options{})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "k1", Key: "K", Type: "T"}, outbox.Message{ID: "k2", Key: "K", Type: "T"}))
	b, err := s.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 1, LeaseFor: time.Minute, Ordered: true})
	require.NoError(t, err)
	_, err = s.Settle(ctx, b.Token, []backend.Outcome{{ID: "k1", Kind: backend.OutcomeDead, Error: "x"}})
	require.NoError(t, err)

	tx, err := d.DB.BeginTx(ctx, readCommitted)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	heads, err := readHeads(ctx, tx, keyHeadsSQL(s.t, "", 10))
	require.NoError(t, err)
	require.Len(t, heads, 1, "k2 is K's head while k1 is dead")
	_, err = d.DB.ExecContext(ctx, "UPDATE outbox SET status = 'pending', next_attempt_at = UTC_TIMESTAMP(6) WHERE event_id = 'k1'")
	require.NoError(t, err)
	rows, err := readRows(ctx, tx, claimHeadsSQL(s.t, heads[:1], 10))
	require.NoError(t, err)
	require.Empty(t, rows, "k1 is pending again: k2 is no longer the head")
}

// TestInsertNamesOnlyTheColumnsSet: the insert of messages without
// headers, creation time or head start names six columns and adds no
// interval (the nine-column statement cost the writer's transaction 2
// to 3 points more in the bench); a column is named when any message of
// the statement sets it.
func TestInsertNamesOnlyTheColumnsSet(t *testing.T) {
	tg := newTarget("outbox", "", false)
	plain := insertRow{id: "a", typ: "T", payload: []byte{}}
	withHeaders := insertRow{id: "b", typ: "T", payload: []byte{}, headers: `{"a":"b"}`}
	withCreated := insertRow{id: "c", typ: "T", payload: []byte{}, occurredAt: "2026-01-02 03:04:05.000000"}
	for _, c := range []struct {
		name      string
		headStart time.Duration
		rows      []insertRow
		cols      string
		perRow    int
	}{
		{"plain", 0, []insertRow{plain}, "(event_id, event_key, event_type, payload, created_at, next_attempt_at) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", 4},
		{"headers in one row", 0, []insertRow{plain, withHeaders}, "(event_id, event_key, event_type, payload, created_at, next_attempt_at, headers) VALUES", 5},
		{"creation time in one row", 0, []insertRow{withCreated, plain}, "(event_id, event_key, event_type, payload, created_at, next_attempt_at, occurred_at) VALUES", 5},
		{"head start", time.Second, []insertRow{plain}, "(event_id, event_key, event_type, payload, created_at, next_attempt_at, lease_id) VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)", 6},
		{"everything", time.Second, []insertRow{withHeaders, withCreated}, "(event_id, event_key, event_type, payload, created_at, next_attempt_at, lease_id, headers, occurred_at) VALUES", 8},
	} {
		st := insertSQL(tg, c.headStart, c.rows)
		require.Contains(t, st.text, c.cols, c.name)
		require.Len(t, st.args, c.perRow*len(c.rows), c.name)
		require.Equal(t, c.perRow*len(c.rows), strings.Count(st.text, "?"), c.name)
	}
}
