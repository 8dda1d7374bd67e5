package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// historyCase is one published history the history scenario switches
// Ordering on over.
type historyCase struct {
	records int
	keyed   bool // on one key, or without a key
}

// history measures issue 28's defect 3: ordered claims over a history
// that workers without Ordering published. For each case it reports the
// rows an idle ordered claim reads (Handler_read_*, one connection) and
// how long a new message of the history's key, and one of another key,
// take to reach the sink of an ordered worker at the default poll.
func (b *bench) history(ctx context.Context, sz sizes) ([]row, error) {
	var rows []row
	for _, c := range sz.histories {
		r, err := b.historyCase(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("history of %d: %w", c.records, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (b *bench) historyCase(ctx context.Context, c historyCase) (row, error) {
	store, err := b.freshStore(ctx, b.db)
	if err != nil {
		return row{}, err
	}
	key, what := "room-1", "published records of one key"
	if !c.keyed {
		key, what = "", "published unkeyed records"
	}
	// The history, delivered (behind the default consumer's position),
	// with ids given (see fillSized).
	q := fmt.Sprintf("INSERT INTO %s (id, event_id, event_key, event_type, payload, created_at) SELECT n + 1, CONCAT('h-', n), ?, 'RoomGiftSent', 'x', UTC_TIMESTAMP(6) FROM %s ORDER BY n", table, numbers(c.records))
	if _, err := b.db.ExecContext(ctx, q, key); err != nil {
		return row{}, err
	}
	if _, err := b.db.ExecContext(ctx, "UPDATE "+table+"_consumers SET walked = (SELECT MAX(id) FROM "+table+")"); err != nil {
		return row{}, err
	}
	if _, err := b.db.ExecContext(ctx, "ANALYZE TABLE "+table); err != nil {
		return row{}, err
	}
	read, err := b.idleOrderedClaimReads(ctx)
	if err != nil {
		return row{}, err
	}
	same, other, err := b.newMessageDelays(ctx, store, key)
	if err != nil {
		return row{}, err
	}
	return row{
		Scenario:  fmt.Sprintf("history: Ordering switched on over %d %s", c.records, what),
		Figure:    fmt.Sprintf("%d rows read per idle ordered claim", read),
		Reference: fmt.Sprintf("a new message of that key after %v, of another key after %v (poll 1s)", same.Round(time.Millisecond), other.Round(time.Millisecond)),
		Target:    "rows read independent of the history; the key not held up",
	}, nil
}

// idleOrderedClaimReads is the most rows any of three ordered claims,
// with nothing due, reads.
func (b *bench) idleOrderedClaimReads(ctx context.Context) (int64, error) {
	one, err := b.pool()
	if err != nil {
		return 0, err
	}
	defer one.Close()
	one.SetMaxOpenConns(1)
	s, err := mysql.New(one, mysql.Options{Table: table})
	if err != nil {
		return 0, err
	}
	var most int64
	for range 3 {
		before, err := sessionReads(ctx, one)
		if err != nil {
			return 0, err
		}
		if _, err := s.Claim(ctx, backend.ClaimParams{Owner: "bench", Limit: 100, LeaseFor: time.Minute, Ordered: true}); err != nil {
			return 0, err
		}
		after, err := sessionReads(ctx, one)
		if err != nil {
			return 0, err
		}
		most = max(most, after-before)
	}
	return most, nil
}

func sessionReads(ctx context.Context, db *sql.DB) (int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var (
			name string
			v    int64
		)
		if err := rows.Scan(&name, &v); err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, rows.Err()
}

// newMessageDelays enqueues a message of key and one of another key
// while an ordered worker runs at the default poll, and returns how long
// each took to reach the sink.
func (b *bench) newMessageDelays(ctx context.Context, store *mysql.Store, key string) (same, other time.Duration, err error) {
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	sink := outbox.SinkFunc(func(_ context.Context, m outbox.Message) error {
		mu.Lock()
		arrived[m.ID] = time.Now()
		mu.Unlock()
		return nil
	})
	w, err := outbox.NewWorker(store, sink, outbox.WorkerOptions{Ordering: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return 0, 0, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(runCtx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(1500 * time.Millisecond) // the worker is in its poll, as a service's is
	start := time.Now()
	if err := store.Enqueue(ctx, b.db, nil, outbox.Message{ID: "new-same", Key: key, Type: "T"}, outbox.Message{ID: "new-other", Key: "room-2", Type: "T"}); err != nil {
		return 0, 0, err
	}
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		a, o := arrived["new-same"], arrived["new-other"]
		mu.Unlock()
		if !a.IsZero() && !o.IsZero() {
			return a.Sub(start), o.Sub(start), nil
		}
	}
	return 0, 0, fmt.Errorf("the new messages did not arrive within 5 minutes")
}
