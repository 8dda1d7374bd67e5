package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/ctxwait"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// The business tables: a row per room, whose seq is the number of events
// the room has committed, and a row per event. A command locks its room's
// row (SELECT … FOR UPDATE), as docs/ordering.md asks of a service that
// wants per-key order, so the room's events are numbered in commit order:
// after the run, a room's seq says exactly which events committed.
const (
	roomsTable    = "soak_rooms"
	commandsTable = "soak_commands"
	eventType     = "SoakEvent"
)

// createBusinessTables creates the business tables with rooms rooms.
func createBusinessTables(ctx context.Context, db *sql.DB, d dialect, rooms int) error {
	stmts := []string{
		"CREATE TABLE " + roomsTable + " (room INT NOT NULL PRIMARY KEY, seq BIGINT NOT NULL)",
		"CREATE TABLE " + commandsTable + " (room INT NOT NULL, seq BIGINT NOT NULL, event_id VARCHAR(64) NOT NULL, PRIMARY KEY (room, seq))",
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("create the business tables: %w", err)
		}
	}
	for from := 0; from < rooms; from += 500 {
		var values []string
		var args []any
		for r := from; r < min(from+500, rooms); r++ {
			values = append(values, "("+d.ph(len(args)+1)+", 0)")
			args = append(args, r)
		}
		q := "INSERT INTO " + roomsTable + " (room, seq) VALUES " + strings.Join(values, ", ")
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("create the rooms: %w", err)
		}
	}
	return nil
}

// committedPlaces returns, by room, how many events it committed.
func committedPlaces(ctx context.Context, db *sql.DB, rooms int) ([]int64, error) {
	out := make([]int64, rooms)
	rows, err := db.QueryContext(ctx, "SELECT room, seq FROM "+roomsTable)
	if err != nil {
		return nil, fmt.Errorf("read the rooms: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var room int
		var seq int64
		if err := rows.Scan(&room, &seq); err != nil {
			return nil, fmt.Errorf("read the rooms: %w", err)
		}
		if room >= 0 && room < rooms {
			out[room] = seq
		}
	}
	return out, rows.Err()
}

// eventID returns the ID of room's event at place seq, from the business
// table, or "" if there is none.
func eventID(ctx context.Context, db *sql.DB, d dialect, room int, seq int64) (string, error) {
	var id string
	err := db.QueryRowContext(ctx, "SELECT event_id FROM "+commandsTable+" WHERE room = "+d.ph(1)+" AND seq = "+d.ph(2), room, seq).Scan(&id)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return id, err
}

// roomKey is the Message.Key of room's events.
func roomKey(room int) string { return fmt.Sprintf("room-%03d", room) }

// load runs the writers: commands at a steady rate, each a transaction
// through Writer.Do (the path docs/concepts.md recommends) that locks its
// room's row, moves the room on, writes a business row per event, and
// enqueues the events, published right after the commit.
type load struct {
	writer  *outbox.Writer
	rooms   int
	perTx   int
	rate    float64 // events per second
	writers int
	logger  *slog.Logger

	lockSQL, updateSQL, insertSQL string

	events   atomic.Int64 // events of the commands that succeeded
	commands atomic.Int64
	failures atomic.Int64
	// behind is the most a command started after its time, since the
	// last takeBehind, in nanoseconds.
	behind atomic.Int64

	mu sync.Mutex
	// took counts how long each command's Do took (the transaction and
	// the after-commit publish: what a request waits for), since the last
	// takeLatency.
	took histogram
}

func newLoad(d dialect, writer *outbox.Writer, cfg *config, logger *slog.Logger) *load {
	values := make([]string, cfg.EventsPerTx)
	for i := range values {
		values[i] = fmt.Sprintf("(%s, %s, %s)", d.ph(3*i+1), d.ph(3*i+2), d.ph(3*i+3))
	}
	return &load{writer: writer, rooms: cfg.Rooms, perTx: cfg.EventsPerTx, rate: cfg.Rate, writers: cfg.Writers, logger: logger,
		lockSQL:   "SELECT seq FROM " + roomsTable + " WHERE room = " + d.ph(1) + " FOR UPDATE",
		updateSQL: "UPDATE " + roomsTable + " SET seq = " + d.ph(1) + " WHERE room = " + d.ph(2),
		insertSQL: "INSERT INTO " + commandsTable + " (room, seq, event_id) VALUES " + strings.Join(values, ", "),
	}
}

// run writes from start for d, at the rate, and returns when the last
// command has ended or ctx is done. Command n is due at start + n×(the
// interval): writers that fall behind catch up as fast as they can, as a
// service's queued requests would, but none starts after start+d, so a
// run that cannot keep up writes fewer events, not for longer.
func (l *load) run(ctx context.Context, start time.Time, d time.Duration) {
	every := time.Duration(float64(time.Second) * float64(l.perTx) / l.rate)
	total := int64(d / every)
	end := start.Add(d)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range l.writers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for {
				n := next.Add(1) - 1
				if n >= total {
					return
				}
				at := start.Add(time.Duration(n) * every)
				if !sleepUntil(ctx, at) || time.Now().After(end) {
					return
				}
				l.noteBehind(time.Since(at))
				l.command(ctx, rng.IntN(l.rooms))
			}
		})
	}
	wg.Wait()
}

// sleepUntil waits until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	return ctxwait.Sleep(ctx, time.Until(t)) == nil
}

func (l *load) noteBehind(d time.Duration) {
	for {
		old := l.behind.Load()
		if int64(d) <= old || l.behind.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// takeBehind returns the most a command started late since the last call.
func (l *load) takeBehind() time.Duration { return time.Duration(l.behind.Swap(0)) }

// takeLatency returns the figures of the commands' durations since the
// last call.
func (l *load) takeLatency() lagFigures {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.took.figures()
	l.took = histogram{}
	return f
}

// command runs one command on room. A failed one is counted and logged
// (the first few, then every hundredth): the run goes on.
func (l *load) command(ctx context.Context, room int) {
	began := time.Now()
	defer func() {
		l.mu.Lock()
		l.took.add(time.Since(began))
		l.mu.Unlock()
	}()
	msgs, err := l.writer.Do(ctx, func(ctx context.Context, tx *sql.Tx) ([]outbox.Message, error) {
		return l.write(ctx, tx, room)
	})
	if err != nil {
		if n := l.failures.Add(1); n <= 5 || n%100 == 0 {
			l.logger.WarnContext(ctx, "a command failed", slog.Int("room", room), slog.Int64("failures", n), slog.String("error", err.Error()))
		}
		return
	}
	l.commands.Add(1)
	l.events.Add(int64(len(msgs)))
}

// write is the command's work in its transaction: lock the room, number
// its new events, write their business rows, and return the events.
func (l *load) write(ctx context.Context, tx *sql.Tx, room int) ([]outbox.Message, error) {
	var seq int64
	if err := tx.QueryRowContext(ctx, l.lockSQL, room).Scan(&seq); err != nil {
		return nil, fmt.Errorf("lock room %d: %w", room, err)
	}
	written := time.Now()
	msgs := make([]outbox.Message, l.perTx)
	args := make([]any, 0, 3*l.perTx)
	for i := range msgs {
		seq++
		id := outbox.NewID()
		msgs[i] = outbox.Message{ID: id, Key: roomKey(room), Type: eventType, Payload: encodePayload(room, seq, written)}
		args = append(args, room, seq, id)
	}
	if _, err := tx.ExecContext(ctx, l.updateSQL, seq, room); err != nil {
		return nil, fmt.Errorf("move room %d on: %w", room, err)
	}
	if _, err := tx.ExecContext(ctx, l.insertSQL, args...); err != nil {
		return nil, fmt.Errorf("write room %d's events: %w", room, err)
	}
	return msgs, nil
}
