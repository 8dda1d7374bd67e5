package activityservice

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// UserLevelUp is the type of activity-service's own event: a user's
// gift points sent reached the next threshold (Config.Levels).
const UserLevelUp = "UserLevelUp"

// LevelUp is a UserLevelUp event's payload.
type LevelUp struct {
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	UserID    string `json:"user_id"`
	// Level is the level reached (1 for the first threshold); Threshold
	// its gift points.
	Level     int   `json:"level"`
	Threshold int64 `json:"threshold"`
	// PointsSent is the user's total after the gift that crossed it,
	// CauseEventID that gift's room event.
	PointsSent   int64  `json:"points_sent"`
	CauseEventID string `json:"cause_event_id"`
	OccurredAtMs int64  `json:"occurred_at_ms"`
}

// projector applies room events to the activity tables, inside the
// inbox's transaction, and writes the level-ups to the outbox in the
// same transaction.
type projector struct {
	outbox    *mysql.Store
	levels    []int64
	headStart time.Duration
	now       func() time.Time
}

// apply is the inbox handler's body for ev; it returns the level-up
// messages it enqueued, for the after-commit publish. It may run more
// than once for one event (the inbox retries a rolled-back transaction):
// everything it does goes through tx.
func (p *projector) apply(ctx context.Context, tx *sql.Tx, ev roomEvent) ([]outbox.Message, error) {
	switch ev.Type {
	case RoomCreated:
		if _, err := tx.ExecContext(ctx, "INSERT INTO activity_rooms (room_id, owner_id) VALUES (?, ?)"+
			" ON DUPLICATE KEY UPDATE owner_id = COALESCE(owner_id, VALUES(owner_id))", ev.RoomID, ev.UserID); err != nil {
			return nil, err
		}
		return nil, addToUser(ctx, tx, ev.UserID, "rooms_created = rooms_created + 1")
	case RoomUserJoined:
		res, err := tx.ExecContext(ctx, "INSERT IGNORE INTO activity_user_rooms (user_id, room_id) VALUES (?, ?)", ev.UserID, ev.RoomID)
		if err != nil {
			return nil, err
		}
		first, err := res.RowsAffected()
		if err != nil {
			return nil, err
		}
		return nil, addToUser(ctx, tx, ev.UserID, "joins = joins + 1, rooms_joined = rooms_joined + ?", first)
	case RoomUserLeft:
		return nil, addToUser(ctx, tx, ev.UserID, "leaves = leaves + 1")
	case RoomGiftSent:
		return p.applyGift(ctx, tx, ev)
	}
	return nil, fmt.Errorf("apply: event type %q has no handler", ev.Type)
}

// addToUser creates the user's row if need be and applies set, a fixed
// SET clause of this file's (never input), with args.
func addToUser(ctx context.Context, tx *sql.Tx, user, set string, args ...any) error {
	if _, err := tx.ExecContext(ctx, "INSERT IGNORE INTO activity_users (user_id) VALUES (?)", user); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, "UPDATE activity_users SET "+set+" WHERE user_id = ?", append(args, user)...)
	return err
}

// applyGift adds a gift to its sender and its room, and enqueues a
// UserLevelUp for each threshold the sender's points crossed. The
// sender's row is locked by the UPDATE until commit, so that concurrent
// gifts of one sender see each other's totals: each threshold is crossed
// by exactly one gift, and the inbox applies each gift once.
func (p *projector) applyGift(ctx context.Context, tx *sql.Tx, ev roomEvent) ([]outbox.Message, error) {
	if _, err := tx.ExecContext(ctx, "INSERT INTO activity_rooms (room_id, gifts, gift_items, gift_points) VALUES (?, 1, ?, ?)"+
		" ON DUPLICATE KEY UPDATE gifts = gifts + 1, gift_items = gift_items + VALUES(gift_items), gift_points = gift_points + VALUES(gift_points)",
		ev.RoomID, ev.Count, ev.Points); err != nil {
		return nil, err
	}
	if err := addToUser(ctx, tx, ev.UserID, "gifts_sent = gifts_sent + 1, gift_items_sent = gift_items_sent + ?, points_sent = points_sent + ?",
		ev.Count, ev.Points); err != nil {
		return nil, err
	}
	var (
		points int64
		level  int
	)
	if err := tx.QueryRowContext(ctx, "SELECT points_sent, level FROM activity_users WHERE user_id = ?", ev.UserID).Scan(&points, &level); err != nil {
		return nil, err
	}
	reached := levelFor(p.levels, points)
	if reached <= level {
		return nil, nil
	}
	now := p.now()
	msgs := make([]outbox.Message, 0, reached-level)
	for l := level + 1; l <= reached; l++ {
		up := LevelUp{EventID: svckit.NewEventID(now), EventType: UserLevelUp, UserID: ev.UserID, Level: l, Threshold: p.levels[l-1],
			PointsSent: points, CauseEventID: ev.ID, OccurredAtMs: now.UnixMilli()}
		payload, err := json.Marshal(up)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, outbox.Message{ID: up.EventID, Key: ev.UserID, Type: UserLevelUp, Payload: payload,
			Headers: map[string]string{"cause_event_id": ev.ID}, CreatedAt: now})
	}
	if _, err := tx.ExecContext(ctx, "UPDATE activity_users SET level = ? WHERE user_id = ?", reached, ev.UserID); err != nil {
		return nil, err
	}
	if err := p.outbox.Enqueue(ctx, tx, &outbox.EnqueueOptions{HeadStart: p.headStart}, msgs...); err != nil {
		return nil, err
	}
	return msgs, nil
}

// levelFor is the level that points reach: how many thresholds are at
// most points.
func levelFor(levels []int64, points int64) int {
	n := 0
	for n < len(levels) && levels[n] <= points {
		n++
	}
	return n
}
