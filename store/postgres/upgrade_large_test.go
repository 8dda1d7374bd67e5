package postgres_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// upgradeRows is how many messages TestUpgradeOfALargeTable writes before
// the upgrade: OUTBOXRELAY_UPGRADE_ROWS, or 20,000 (docs/upgrades.md
// gives the figures of a run with 1,000,000).
func upgradeRows(t *testing.T) int {
	t.Helper()
	s := os.Getenv("OUTBOXRELAY_UPGRADE_ROWS")
	if s == "" {
		return 20_000
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "OUTBOXRELAY_UPGRADE_ROWS")
	require.GreaterOrEqual(t, n, 1000, "OUTBOXRELAY_UPGRADE_ROWS")
	return n
}

// TestUpgradeOfALargeTable: tables of schema version 1 holding a long
// published history, a backlog of pending records (some failed before,
// some under leases that ran out), dead letters, and a named consumer
// with messages handed over to it (pending, published, dead) and
// messages not yet handed over, migrate through version 2 to 3 while a
// writer goes on inserting (naming only columns that both versions have:
// a writer of version 1 itself fails after the upgrade, docs/upgrades.md). Afterwards each consumer
// gets exactly what it still had to get, each message once, every key in
// order, and the dead letters stay dead. The test logs how long Migrate
// took and how long the writer waited: with OUTBOXRELAY_UPGRADE_ROWS=
// 1000000 that is the measurement docs/upgrades.md reports.
func TestUpgradeOfALargeTable(t *testing.T) {
	n := upgradeRows(t)
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	v1, err := postgres.SchemaSQL(testTable, 0, 1)
	require.NoError(t, err)
	_, err = d.DB.ExecContext(ctx, v1)
	require.NoError(t, err)

	// Messages 1..n: the last n/50 a backlog (pending, with a dead letter,
	// a lease that ran out or an earlier failure here and there), dead
	// letters now and then in the history, the rest published. Keys k0 to
	// k99, every seventh message without a key.
	backlog, notHanded := n-n/50, n-n/100
	start := time.Now()
	_, err = d.DB.ExecContext(ctx, `INSERT INTO room_outbox (seq, event_id, event_key, event_type, payload, status, retry_count, last_error,
	created_at, available_at, next_attempt_at, lease_token, finished_at) OVERRIDING SYSTEM VALUE
SELECT n, 'm-' || n, CASE WHEN n % 7 = 0 THEN '\x'::bytea ELSE convert_to('k' || n % 100, 'UTF8') END, 'T', convert_to(repeat('p', 256), 'UTF8'),
	CASE WHEN n % 10007 = 0 OR (n > $1 AND n % 97 = 0) THEN 'dead' WHEN n > $1 THEN 'pending' ELSE 'published' END,
	CASE WHEN n % 10007 = 0 OR (n > $1 AND n % 97 = 0) THEN 5 WHEN n > $1 AND n % 83 = 0 THEN 2 ELSE 0 END,
	CASE WHEN n % 10007 = 0 OR (n > $1 AND n % 97 = 0) THEN 'gave up' WHEN n > $1 AND n % 83 = 0 THEN 'flaky' ELSE '' END,
	now() - interval '1 hour', now() - interval '1 hour', now() - interval '1 second',
	CASE WHEN n > $1 AND n % 89 = 0 THEN n ELSE 0 END,
	CASE WHEN n % 10007 = 0 OR (n > $1 AND n % 97 = 0) OR n <= $1 THEN now() - interval '1 minute' END
FROM generate_series(1, $2::bigint) n`, backlog, n)
	require.NoError(t, err)
	// audit: registered from the start, handed every message up to
	// notHanded (all were written in one transaction: the hand-over's
	// cursor is that transaction and seq notHanded); of the backlog's,
	// every third still pending for it (every 31st dead), the rest
	// published.
	for _, q := range []string{
		`SELECT setval(pg_get_serial_sequence('room_outbox', 'seq'), (SELECT max(seq) FROM room_outbox))`,
		fmt.Sprintf(`INSERT INTO room_outbox_consumers (name, start_seq, cursor_xid, cursor_seq)
SELECT 'audit', 0, xid, seq FROM room_outbox WHERE seq = %d`, notHanded),
		fmt.Sprintf(`INSERT INTO room_outbox_consumption (consumer_id, seq, event_key, status, retry_count, last_error, next_attempt_at, finished_at)
SELECT c.id, o.seq, o.event_key, v.status, CASE WHEN v.status = 'dead' THEN 5 ELSE 0 END, '', now() - interval '1 second',
	CASE WHEN v.status <> 'pending' THEN now() END
FROM room_outbox_consumers c, room_outbox o,
	LATERAL (SELECT CASE WHEN o.seq %% 31 = 0 THEN 'dead' WHEN o.seq %% 3 = 0 THEN 'pending' ELSE 'published' END AS status) v
WHERE c.name = 'audit' AND o.seq > %d AND o.seq <= %d`, backlog, notHanded),
		"ANALYZE room_outbox, room_outbox_consumption",
	} {
		_, err = d.DB.ExecContext(ctx, q)
		require.NoError(t, err, q)
	}
	var wantDefault, wantAudit []string
	for i := backlog + 1; i <= n; i++ {
		id := "m-" + strconv.Itoa(i)
		if i%10007 != 0 && i%97 != 0 {
			wantDefault = append(wantDefault, id)
		}
		if i > notHanded || (i%31 != 0 && i%3 == 0) {
			wantAudit = append(wantAudit, id)
		}
	}
	t.Logf("%d messages of version 1 written in %v: %d pending for the default consumer, %d for audit",
		n, time.Since(start).Round(time.Millisecond), len(wantDefault), len(wantAudit))

	s, err := postgres.New(d.DB, postgres.Options{Table: testTable})
	require.NoError(t, err)
	w := startUpgradeWriter(d.DB)
	start = time.Now()
	require.NoError(t, s.Migrate(ctx))
	took := time.Since(start)
	written := w.stop()
	require.NoError(t, s.Verify(ctx))
	t.Logf("Migrate: %v; the writer: %d messages written during it and after, %d attempts failed, "+
		"longest wait of one write %v, longest time without a write %v",
		took.Round(time.Millisecond), len(written), w.failed, w.longestWait.Round(time.Millisecond), w.longestGap.Round(time.Millisecond))
	require.Zero(t, w.failed, "a writer waits for the upgrade; none of its inserts fails")
	wantDefault = append(wantDefault, written...)
	wantAudit = append(wantAudit, written...)

	for _, id := range []string{"m-" + strconv.Itoa(backlog+97-backlog%97), "m-10007"} {
		if id == "m-10007" && n < 10007 {
			continue
		}
		r, err := s.Get(ctx, id)
		require.NoError(t, err, id)
		require.Equal(t, outbox.StatusDead, r.Status, id)
		require.Equal(t, 5, r.Attempts, id)
	}
	requireDrainedInOrder(t, s, wantDefault)
	audit, err := s.Consumer("audit")
	require.NoError(t, err)
	requireDrainedInOrder(t, audit, wantAudit)
}

// upgradeWriter inserts messages in a loop while Migrate runs; an attempt that fails is tried again.
type upgradeWriter struct {
	done        chan struct{}
	wg          sync.WaitGroup
	written     []string
	failed      int
	longestWait time.Duration
	longestGap  time.Duration
}

func startUpgradeWriter(db *sql.DB) *upgradeWriter {
	w := &upgradeWriter{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		ctx := context.Background()
		last := time.Now()
		for i := 0; ; {
			select {
			case <-w.done:
				if i >= 10 {
					return
				}
			default:
			}
			id, key := fmt.Sprintf("w-%d", i), fmt.Sprintf("k%d", i%100)
			began := time.Now()
			_, err := db.ExecContext(ctx, "INSERT INTO room_outbox (event_id, event_key, event_type, payload) VALUES ($1, convert_to($2, 'UTF8'), 'T', 'p')", id, key)
			now := time.Now()
			w.longestWait = max(w.longestWait, now.Sub(began))
			if err != nil {
				w.failed++
				select {
				case <-w.done:
					return
				case <-time.After(time.Millisecond): // the writer's own pace between attempts
				}
				continue
			}
			w.longestGap = max(w.longestGap, now.Sub(last))
			last = now
			w.written = append(w.written, id)
			i++
		}
	}()
	return w
}

// stop ends the writer after its tenth message and returns what it wrote.
func (w *upgradeWriter) stop() []string {
	close(w.done)
	w.wg.Wait()
	return w.written
}

// requireDrainedInOrder claims c's records, ordered, until every one of
// want is in, and requires exactly want, each once, every key's messages
// in the order they were written (m-1 < … < w-0 < w-1 < …).
func requireDrainedInOrder(t *testing.T, c backend.Store, want []string) {
	t.Helper()
	ctx := context.Background()
	var got []string
	keys := map[string][]string{}
	deadline := time.Now().Add(5 * time.Minute)
	// Until every message is in, then one claim more.
	for extra := 0; extra < 2; {
		require.False(t, time.Now().After(deadline), "drained %d of %d", len(got), len(want))
		if len(got) >= len(want) {
			extra++
		}
		b, err := c.Claim(ctx, backend.ClaimParams{Owner: "drain", Limit: 1000, LeaseFor: time.Minute, Ordered: true})
		require.NoError(t, err)
		if b.Len() == 0 {
			continue
		}
		outcomes := make([]backend.Outcome, len(b.Records))
		for i, r := range b.Records {
			got = append(got, r.ID)
			if r.Key != "" {
				keys[r.Key] = append(keys[r.Key], r.ID)
			}
			outcomes[i] = backend.Outcome{ID: r.ID, Seq: r.Seq, Kind: backend.OutcomePublished}
		}
		_, err = c.Settle(ctx, b.Token, outcomes)
		require.NoError(t, err)
	}
	require.Len(t, got, len(want), "each message once")
	require.ElementsMatch(t, want, got)
	for key, ids := range keys {
		require.True(t, slices.IsSortedFunc(ids, writeOrder), "key %s out of order: %v", key, ids)
	}
}

// writeOrder orders m-<n> (before the upgrade) before w-<n> (the writer's).
func writeOrder(a, b string) int {
	num := func(s string) (int, int) {
		phase := 0
		if strings.HasPrefix(s, "w-") {
			phase = 1
		}
		v, _ := strconv.Atoi(s[2:])
		return phase, v
	}
	pa, va := num(a)
	pb, vb := num(b)
	if pa != pb {
		return pa - pb
	}
	return va - vb
}
