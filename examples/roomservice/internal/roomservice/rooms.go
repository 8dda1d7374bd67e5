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
	// The command log: one row per command_id, holding the command's
	// digest and a bounded response, so that a repeated command returns
	// the first result and emits nothing. See commands.go.
	`CREATE TABLE IF NOT EXISTS room_commands (
		command_id     VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
		room_id        VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		kind           VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
		command_digest BINARY(32) NULL,
		response       VARBINARY(8192) NULL,
		created_at_ms  BIGINT NOT NULL,
		KEY room_commands_created_at (created_at_ms)
	) ENGINE=InnoDB`,
}

// Snapshot is a room as the API shows it. Its size does not grow with
// the room: a command's result carries no members at all, and GET
// /v1/rooms/{id} carries the first page of them (at most
// membersPageSize, in user_id order) and NextAfter, the cursor for GET
// /v1/rooms/{id}/members?after=... when there are more.
type Snapshot struct {
	RoomID      string `json:"room_id"`
	OwnerID     string `json:"owner_id"`
	Heat        int64  `json:"heat"`
	Version     int64  `json:"version"`
	MemberCount int64  `json:"member_count"`
	// Members is nil, and left out of the JSON, in a command's result.
	Members     []string    `json:"members,omitzero"`
	NextAfter   string      `json:"next_after,omitempty"`
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

// loadSummary reads a room without its members: what a command's result
// and the command log hold. An unknown room is a not-found error.
func loadSummary(ctx context.Context, q queryer, id string) (Snapshot, error) {
	s := Snapshot{RoomID: id}
	err := q.QueryRowContext(ctx, "SELECT owner_id, heat, version FROM rooms WHERE room_id = ?", id).Scan(&s.OwnerID, &s.Heat, &s.Version)
	if errors.Is(err, sql.ErrNoRows) {
		return Snapshot{}, notFound("room %q does not exist", id)
	}
	if err != nil {
		return Snapshot{}, err
	}
	n, err := memberCount(ctx, q, id)
	if err != nil {
		return Snapshot{}, err
	}
	s.MemberCount = int64(n)
	s.GiftRanking, err = ranking(ctx, q, id)
	return s, err
}

// loadSnapshot reads a room and the first page of its members, for GET
// /v1/rooms/{id}; an unknown room is a not-found error.
func loadSnapshot(ctx context.Context, q queryer, id string) (Snapshot, error) {
	s, err := loadSummary(ctx, q, id)
	if err != nil {
		return Snapshot{}, err
	}
	s.Members, s.NextAfter, err = membersPage(ctx, q, id, "", membersPageSize)
	return s, err
}

// Member pages: the size GET /v1/rooms/{id} shows and the members
// endpoint's default, and the most one page may ask for.
const (
	membersPageSize    = 100
	maxMembersPageSize = 500
)

// membersPage returns up to limit members of a room whose user_id sorts
// after after, in user_id order, and the cursor for the next page ("" on
// the last). It seeks on the primary key (room_id, user_id), so a deep
// page costs what the first does.
func membersPage(ctx context.Context, q queryer, roomID, after string, limit int) ([]string, string, error) {
	page, err := scanStrings(ctx, q, "SELECT user_id FROM room_members WHERE room_id = ? AND user_id > ?"+
		" ORDER BY user_id LIMIT ?", roomID, after, limit+1)
	if err != nil || len(page) <= limit {
		return page, "", err
	}
	page = page[:limit]
	return page, page[limit-1], nil
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
