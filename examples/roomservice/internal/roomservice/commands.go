package roomservice

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// The command log (room_commands) makes command IDs idempotent. Each row
// holds:
//
//   - command_digest: SHA-256 of the command's canonical encoding (see
//     commandDigest). A command ID seen again replays only when the new
//     command has the same digest; otherwise it is a 409
//     command_id_reused. Rows written before the digest existed hold NULL:
//     for those, as before, the kind and the room must match.
//   - response: the JSON of the first Result. It is bounded (event IDs and
//     the room's summary, never its members; at most maxResponseBytes), so
//     the log grows by a constant per command however big a room gets.
//   - created_at_ms: when the command ran; PurgeCommands deletes rows past
//     commands.retention.

// commandDigestVersion starts every digested encoding. Change it, and
// the digest of every logged command changes with it: every retry in
// flight would then be refused as a reuse. So change the encoding only
// with a new version, and compare old rows by the old one.
const commandDigestVersion = "roomservice.command.v1"

// commandDigest is SHA-256 over the command's canonical encoding: the
// version, then kind, room_id, user_id (owner_id for create), gift_id
// and count, each as a 4-byte big-endian length and its bytes, so that
// no two commands share an encoding ("ab"+"c" is not "a"+"bc"). The
// gift fields count only for gifts. The command ID names the command
// and the request ID and traceparent only trace it, so none of them is
// part of it.
func commandDigest(c Command) []byte {
	gift, count := "", ""
	if c.Kind == KindGift {
		gift, count = c.GiftID, strconv.Itoa(c.Count)
	}
	h := sha256.New()
	var n [4]byte
	for _, f := range []string{commandDigestVersion, c.Kind, c.RoomID, c.UserID, gift, count} {
		binary.BigEndian.PutUint32(n[:], uint32(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

// maxResponseBytes is the size of room_commands.response (VARBINARY(8192)).
// A response is at most about 1.5 KB (three event IDs, IDs of at most 64
// bytes, ten ranking entries); the guard in logResponse turns a response
// that somehow outgrew the column into a clear error, where a non-strict
// sql_mode would truncate it silently.
const maxResponseBytes = 8192

// logCommand inserts the command's row, claiming its ID. It reports
// whether the ID was taken already (by a committed command: InnoDB makes
// a concurrent insert of the same ID wait until the first one commits or
// rolls back).
func logCommand(ctx context.Context, tx *sql.Tx, cmd Command, nowMs int64) (taken bool, err error) {
	_, err = tx.ExecContext(ctx, "INSERT INTO room_commands (command_id, room_id, kind, command_digest, created_at_ms)"+
		" VALUES (?, ?, ?, ?, ?)", cmd.CommandID, cmd.RoomID, cmd.Kind, commandDigest(cmd), nowMs)
	if mysql.IsDuplicateKey(err) {
		return true, nil
	}
	return false, err
}

// logResponse stores the result of the command logged by logCommand.
func logResponse(ctx context.Context, tx *sql.Tx, commandID string, res Result) error {
	response, err := json.Marshal(res)
	if err != nil {
		return err
	}
	if len(response) > maxResponseBytes {
		return fmt.Errorf("command %q: response of %d bytes is over the command log's %d", commandID, len(response), maxResponseBytes)
	}
	_, err = tx.ExecContext(ctx, "UPDATE room_commands SET response = ? WHERE command_id = ?", response, commandID)
	return err
}

// replay returns the stored result of a command ID seen before. The ID
// must name the same command; reusing it for another is a 409
// command_id_reused, whose message names the first command's kind and
// room but nothing of its caller's.
func replay(ctx context.Context, tx *sql.Tx, cmd Command) (Result, error) {
	var (
		roomID, kind string
		digest       []byte
		response     []byte
	)
	err := tx.QueryRowContext(ctx, "SELECT room_id, kind, command_digest, response FROM room_commands WHERE command_id = ?", cmd.CommandID).
		Scan(&roomID, &kind, &digest, &response)
	if err != nil {
		return Result{}, err
	}
	same := roomID == cmd.RoomID && kind == cmd.Kind
	if digest != nil { // a row from before the digest compares kind and room only
		same = bytes.Equal(digest, commandDigest(cmd))
	}
	if !same || response == nil {
		return Result{}, conflict("command_id_reused",
			"command_id %q was already used for a different command (a %s on room %q); use a new command_id for a new command",
			cmd.CommandID, kind, roomID)
	}
	var res Result
	if err := json.Unmarshal(response, &res); err != nil {
		return Result{}, fmt.Errorf("stored response of command %q: %w", cmd.CommandID, err)
	}
	// A result is never a member list, whatever an old row held.
	res.Room.Members, res.Room.NextAfter = nil, ""
	return res, nil
}
