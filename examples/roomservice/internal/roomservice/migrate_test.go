package roomservice

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// oldRoomCommandsDDL is room_commands as versions before the digest
// created it.
const oldRoomCommandsDDL = `CREATE TABLE room_commands (
	command_id    VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
	room_id       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	kind          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	response      MEDIUMTEXT NULL,
	created_at_ms BIGINT NOT NULL
) ENGINE=InnoDB`

// TestUpgradeFromTheOldCommandLog: an old room_commands gets the digest,
// the bounded response and the retention index, by two instances at once
// and again; its rows stay replayable, by kind and room as before.
func TestUpgradeFromTheOldCommandLog(t *testing.T) {
	db := testutil.NewDatabase(t)
	ctx := context.Background()
	_, err := db.DB.ExecContext(ctx, oldRoomCommandsDDL)
	require.NoError(t, err)
	members := make([]string, 2000)
	for i := range members {
		members[i] = fmt.Sprintf("user-%05d", i)
	}
	old, err := json.Marshal(map[string]any{
		"room": map[string]any{"room_id": "room-1", "owner_id": "alice", "heat": 20010, "version": 2002,
			"members": members, "gift_ranking": []RankEntry{{UserID: "user-00001", Points: 10}}},
		"event_ids": []string{"event-1", "event-2"},
	})
	require.NoError(t, err)
	require.Greater(t, len(old), maxResponseBytes, "an old response that the new column could not hold")
	// Written a minute ago: inside the retention that the App's own
	// purge applies as it starts.
	nowMs := time.Now().Add(-time.Minute).UnixMilli()
	_, err = db.DB.ExecContext(ctx, "INSERT INTO room_commands VALUES ('c-old-join', 'room-1', 'join', ?, ?), ('c-old-create', 'room-1', 'create', NULL, ?)", old, nowMs, nowMs-100)
	require.NoError(t, err)

	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- migrateRoomTables(ctx, db.DB) }()
	}
	require.NoError(t, <-errs, "two instances upgrading at once")
	require.NoError(t, <-errs, "two instances upgrading at once")
	require.NoError(t, migrateRoomTables(ctx, db.DB), "and again: nothing left to do")

	columns, err := tableColumns(ctx, db.DB, "room_commands")
	require.NoError(t, err)
	require.Equal(t, "binary", columns["command_digest"])
	require.Equal(t, "varbinary", columns["response"])
	var indexed int
	require.NoError(t, db.DB.QueryRow("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"+
		" AND TABLE_NAME = 'room_commands' AND INDEX_NAME = 'room_commands_created_at'").Scan(&indexed))
	require.Equal(t, 1, indexed)
	var stored []byte
	require.NoError(t, db.DB.QueryRow("SELECT response FROM room_commands WHERE command_id = 'c-old-join'").Scan(&stored))
	require.NotContains(t, string(stored), "members")
	require.Less(t, len(stored), 1024)

	// The old join replays, bounded, compared by kind and room only.
	a := startApp(t, db, nil)
	want := Result{EventIDs: []string{"event-1", "event-2"}, Room: Snapshot{RoomID: "room-1", OwnerID: "alice", Heat: 20010, Version: 2002,
		MemberCount: 2000, GiftRanking: []RankEntry{{UserID: "user-00001", Points: 10}}}}
	require.Equal(t, want, a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c-old-join"}))
	require.Equal(t, want, a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "carol", "command_id": "c-old-join"}),
		"a row without a digest compares kind and room only")
	status, body := a.do(http.MethodPost, "/v1/rooms/room-1/leave", `{"user_id":"bob","command_id":"c-old-join"}`)
	require.Equal(t, http.StatusConflict, status, string(body))
	require.Contains(t, string(body), "command_id_reused")
	// A row without a response (never committed that way, but possible
	// in a hand-edited log) is refused rather than replayed as empty.
	status, body = a.do(http.MethodPost, "/v1/rooms", `{"room_id":"room-1","owner_id":"alice","command_id":"c-old-create"}`)
	require.Equal(t, http.StatusConflict, status, string(body))

	// New commands get a digest.
	a.command("/v1/rooms", map[string]any{"room_id": "room-2", "owner_id": "alice", "command_id": "c-new"})
	require.Equal(t, 1, a.count("SELECT COUNT(*) FROM room_commands WHERE command_digest IS NOT NULL"))
}
