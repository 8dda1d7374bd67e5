package roomservice

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"

	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// roomSchema is room-service's own state. Times are Unix milliseconds, so
// the service does not depend on the DSN's time settings either.
var roomSchema = []string{
	`CREATE TABLE IF NOT EXISTS rooms (
		room_id       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
		owner_id      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		heat          BIGINT NOT NULL DEFAULT 0,
		version       BIGINT NOT NULL DEFAULT 0,
		created_at_ms BIGINT NOT NULL
	) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS room_members (
		room_id      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		user_id      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		joined_at_ms BIGINT NOT NULL,
		PRIMARY KEY (room_id, user_id)
	) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS room_gift_totals (
		room_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		user_id VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		points  BIGINT NOT NULL,
		PRIMARY KEY (room_id, user_id)
	) ENGINE=InnoDB`,
	// The command log: one row per command_id, holding the response, so
	// that a repeated command returns the first result and emits nothing.
	`CREATE TABLE IF NOT EXISTS room_commands (
		command_id    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
		room_id       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		kind          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		response      MEDIUMTEXT NULL,
		created_at_ms BIGINT NOT NULL
	) ENGINE=InnoDB`,
}

// Snapshot is a room as the API shows it.
type Snapshot struct {
	RoomID      string      `json:"room_id"`
	OwnerID     string      `json:"owner_id"`
	Heat        int64       `json:"heat"`
	Version     int64       `json:"version"`
	Members     []string    `json:"members"`
	GiftRanking []RankEntry `json:"gift_ranking"`
}

// RankEntry is one line of a room's gift ranking.
type RankEntry struct {
	UserID string `json:"user_id"`
	Points int64  `json:"points"`
}

// rankingSize is how many givers the ranking shows.
const rankingSize = 10

// apiError is a failure the client caused; it maps to a 4xx response.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func badRequest(code, format string, args ...any) error {
	return &apiError{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf(format, args...)}
}

func conflict(code, format string, args ...any) error {
	return &apiError{Status: http.StatusConflict, Code: code, Message: fmt.Sprintf(format, args...)}
}

// queryer is what reads need: *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type room struct {
	id, owner     string
	heat, version int64
}

func createRoom(ctx context.Context, tx *sql.Tx, id, owner string, nowMs int64) (room, error) {
	_, err := tx.ExecContext(ctx, "INSERT INTO rooms (room_id, owner_id, created_at_ms) VALUES (?, ?, ?)", id, owner, nowMs)
	if mysql.IsDuplicateKey(err) {
		return room{}, conflict("room_exists", "room %q already exists", id)
	}
	return room{id: id, owner: owner}, err
}

// lockRoom reads a room and locks its row until the transaction ends:
// commands on one room are applied one at a time (the seed's room cell),
// so its events are enqueued in commit order.
func lockRoom(ctx context.Context, tx *sql.Tx, id string) (room, error) {
	r := room{id: id}
	err := tx.QueryRowContext(ctx, "SELECT owner_id, heat, version FROM rooms WHERE room_id = ? FOR UPDATE", id).
		Scan(&r.owner, &r.heat, &r.version)
	if errors.Is(err, sql.ErrNoRows) {
		return room{}, notFound("room %q does not exist", id)
	}
	return r, err
}

func saveRoom(ctx context.Context, tx *sql.Tx, r room) error {
	_, err := tx.ExecContext(ctx, "UPDATE rooms SET heat = ?, version = ? WHERE room_id = ?", r.heat, r.version, r.id)
	return err
}

func addMember(ctx context.Context, tx *sql.Tx, roomID, userID string, nowMs int64) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO room_members (room_id, user_id, joined_at_ms) VALUES (?, ?, ?)", roomID, userID, nowMs)
	if mysql.IsDuplicateKey(err) {
		return conflict("already_member", "user %q is already in room %q", userID, roomID)
	}
	return err
}

func removeMember(ctx context.Context, tx *sql.Tx, roomID, userID string) error {
	res, err := tx.ExecContext(ctx, "DELETE FROM room_members WHERE room_id = ? AND user_id = ?", roomID, userID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return conflict("not_member", "user %q is not in room %q", userID, roomID)
	}
	return nil
}

func addGiftPoints(ctx context.Context, tx *sql.Tx, roomID, userID string, points int64) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO room_gift_totals (room_id, user_id, points) VALUES (?, ?, ?)"+
		" ON DUPLICATE KEY UPDATE points = points + ?", roomID, userID, points, points)
	return err
}

func memberCount(ctx context.Context, q queryer, roomID string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM room_members WHERE room_id = ?", roomID).Scan(&n)
	return n, err
}

// loadSnapshot reads a room; an unknown room is a not-found error.
func loadSnapshot(ctx context.Context, q queryer, id string) (Snapshot, error) {
	s := Snapshot{RoomID: id, Members: []string{}, GiftRanking: []RankEntry{}}
	err := q.QueryRowContext(ctx, "SELECT owner_id, heat, version FROM rooms WHERE room_id = ?", id).Scan(&s.OwnerID, &s.Heat, &s.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return Snapshot{}, notFound("room %q does not exist", id)
	}
	if err != nil {
		return Snapshot{}, err
	}
	if s.Members, err = scanStrings(ctx, q, "SELECT user_id FROM room_members WHERE room_id = ? ORDER BY user_id", id); err != nil {
		return Snapshot{}, err
	}
	s.GiftRanking, err = ranking(ctx, q, id)
	return s, err
}

func ranking(ctx context.Context, q queryer, roomID string) ([]RankEntry, error) {
	rows, err := q.QueryContext(ctx, "SELECT user_id, points FROM room_gift_totals WHERE room_id = ?"+
		" ORDER BY points DESC, user_id LIMIT ?", roomID, rankingSize)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []RankEntry{}
	for rows.Next() {
		var e RankEntry
		if err := rows.Scan(&e.UserID, &e.Points); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func scanStrings(ctx context.Context, q queryer, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
