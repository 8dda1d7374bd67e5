package mysql_test

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

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
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

// TestUpgradeOfALargeTable: tables of schema version 8 holding a long
// published history, a backlog of pending records (some failed before,
// some under leases that ran out), dead letters, and a named consumer
// with messages handed over to it (pending, published, dead) and
// messages not yet handed over, migrate to version 9 while a writer of
// version 8 goes on writing (and, once the columns it names are gone, a
// writer of version 9 takes over). Afterwards each consumer gets exactly
// what it still had to get, each message once, every key in order, and
// the dead letters stay dead. The test logs how long Migrate took and
// how long the writer could not write: with OUTBOXRELAY_UPGRADE_ROWS=
// 1000000 that is the measurement docs/upgrades.md reports.
func TestUpgradeOfALargeTable(t *testing.T) {
	n := upgradeRows(t)
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	execAll(t, d.DB, oldSchema(8))

	// Messages 1..n: the last n/50 a backlog (pending, with a dead letter,
	// a lease that ran out or an earlier failure here and there), dead
	// letters now and then in the history, the rest published. Keys k0 to
	// k99, every seventh message without a key.
	backlog, notHanded := n-n/50, n-n/100
	start := time.Now()
	digits := "(SELECT 0 d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4" +
		" UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)"
	nums := fmt.Sprintf("(SELECT 1 + a.d + 10*b.d + 100*c.d + 1000*e.d + 10000*f.d + 100000*g.d + 1000000*h.d AS n FROM %s a, %s b, %s c, %s e, %s f, %s g, %s h) nums",
		digits, digits, digits, digits, digits, digits, digits)
	_, err := d.DB.ExecContext(ctx, `INSERT INTO room_outbox (id, event_id, event_key, event_type, payload, status, retry_count, last_error,
	created_at, next_attempt_at, fanout, lease_id, lease_until)
SELECT n, CONCAT('m-', n), IF(n % 7 = 0, '', CONCAT('k', n % 100)), 'T', REPEAT('p', 256),
	CASE WHEN n % 10007 = 0 OR (n > ? AND n % 97 = 0) THEN 'dead' WHEN n > ? THEN 'pending' ELSE 'published' END,
	CASE WHEN n % 10007 = 0 OR (n > ? AND n % 97 = 0) THEN 5 WHEN n > ? AND n % 83 = 0 THEN 2 ELSE 0 END,
	CASE WHEN n % 10007 = 0 OR (n > ? AND n % 97 = 0) THEN 'gave up' WHEN n > ? AND n % 83 = 0 THEN 'flaky' END,
	UTC_TIMESTAMP(6) - INTERVAL 1 HOUR, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND,
	IF(n > ?, 0, 1), IF(n > ? AND n % 89 = 0, n, 0), IF(n > ? AND n % 89 = 0, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, '1970-01-01 00:00:01')
FROM `+nums+` WHERE n <= ?`, backlog, backlog, backlog, backlog, backlog, backlog, notHanded, backlog, backlog, n)
	require.NoError(t, err)
	// audit: registered from the start, handed every message up to
	// notHanded; of the backlog's, every third still pending for it
	// (every 31st dead), the rest published.
	execAll(t, d.DB, []string{
		"INSERT INTO room_outbox_consumers (name, start_seq, created_at) VALUES ('audit', 1, UTC_TIMESTAMP(6))",
		fmt.Sprintf(`INSERT INTO room_outbox_consumption (consumer, msg_id, event_id, event_key, event_type, status, retry_count, created_at, next_attempt_at)
SELECT 'audit', id, event_id, event_key, event_type,
	CASE WHEN id %% 31 = 0 THEN 'dead' WHEN id %% 3 = 0 THEN 'pending' ELSE 'published' END,
	IF(id %% 31 = 0, 5, 0), created_at, next_attempt_at
FROM room_outbox WHERE id > %d AND id <= %d`, backlog, notHanded),
		"ANALYZE TABLE room_outbox, room_outbox_consumption",
	})
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
	t.Logf("%d messages of version 8 written in %v: %d pending for the default consumer, %d for audit",
		n, time.Since(start).Round(time.Millisecond), len(wantDefault), len(wantAudit))

	s, err := mysql.New(d.DB, mysql.Options{Table: testTable})
	require.NoError(t, err)
	w := startUpgradeWriter(t, s, d.DB)
	start = time.Now()
	require.NoError(t, s.Migrate(ctx))
	took := time.Since(start)
	written := w.stop(t)
	require.NoError(t, s.Verify(ctx))
	t.Logf("Migrate: %v; the writer: %d messages written during it and after (%d of version 8), %d attempts failed, "+
		"longest wait of one write %v, longest time without a write %v",
		took.Round(time.Millisecond), len(written), w.old, w.failed, w.longestWait.Round(time.Millisecond), w.longestGap.Round(time.Millisecond))
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

// upgradeWriter writes messages in a loop while Migrate runs: as version
// 8 did (an INSERT naming its columns) until that fails, then through
// the store of version 9; an attempt that fails is tried again.
type upgradeWriter struct {
	done        chan struct{}
	wg          sync.WaitGroup
	written     []string
	old, failed int
	longestWait time.Duration
	longestGap  time.Duration
}

func startUpgradeWriter(t *testing.T, s *mysql.Store, db *sql.DB) *upgradeWriter {
	t.Helper()
	w := &upgradeWriter{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		ctx := context.Background()
		v8 := true
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
			var err error
			if v8 {
				_, err = db.ExecContext(ctx, "INSERT INTO room_outbox (event_id, event_key, event_type, payload, created_at, next_attempt_at)"+
					" VALUES (?, ?, 'T', 'p', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))", id, key)
				if err != nil && strings.Contains(err.Error(), "Unknown column") {
					v8 = false
				}
			} else {
				err = s.Enqueue(ctx, db, nil, outbox.Message{ID: id, Key: key, Type: "T", Payload: []byte("p")})
			}
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
			if v8 {
				w.old++
			}
			w.longestGap = max(w.longestGap, now.Sub(last))
			last = now
			w.written = append(w.written, id)
			i++
		}
	}()
	return w
}

// stop ends the writer after ten more messages and returns what it wrote.
func (w *upgradeWriter) stop(t *testing.T) []string {
	t.Helper()
	close(w.done)
	w.wg.Wait()
	return w.written
}

// requireDrainedInOrder claims c's records, ordered, until none is left,
// and requires exactly want, each once, every key's messages in the
// order they were written (m-1 < … < w-0 < w-1 < …).
func requireDrainedInOrder(t *testing.T, c backend.Store, want []string) {
	t.Helper()
	ctx := context.Background()
	var got []string
	keys := map[string][]string{}
	deadline := time.Now().Add(5 * time.Minute)
	// Until every message is in, then one claim more (a gap the writer
	// left may make a claim wait, or come back empty, for GapTimeout).
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
