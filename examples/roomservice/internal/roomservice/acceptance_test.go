package roomservice

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// TestSeedAcceptanceTable walks the seed's acceptance table through the
// HTTP API, once through JoinRoom and once through SendGift. (The worker
// cancel row is TestShutdownOrder.)
func TestSeedAcceptanceTable(t *testing.T) {
	type via struct {
		name    string
		imType  string
		setup   func(a *testApp)
		command func(a *testApp, id string) Result
		applied func(t *testing.T, s Snapshot)
	}
	vias := []via{
		{
			name: "JoinRoom", imType: RoomUserJoined,
			setup: func(*testApp) {},
			command: func(a *testApp, id string) Result {
				return a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "carol-" + id, "command_id": id})
			},
			applied: func(t *testing.T, s Snapshot) {
				// A command's result counts the members; GET lists them.
				require.Equal(t, int64(1), s.MemberCount)
				if s.Members != nil {
					require.Equal(t, []string{"carol-cmd-1"}, s.Members)
				}
			},
		},
		{
			name: "SendGift", imType: RoomGiftSent,
			setup: func(a *testApp) {
				a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "cmd-join-bob"})
			},
			command: func(a *testApp, id string) Result {
				return a.command("/v1/rooms/room-1/gifts", map[string]any{"user_id": "bob", "gift_id": "rose", "count": 3, "command_id": id})
			},
			applied: func(t *testing.T, s Snapshot) {
				require.Equal(t, []RankEntry{{UserID: "bob", Points: 15}}, s.GiftRanking)
			},
		},
	}
	for _, v := range vias {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			a := startApp(t, nil, nil)
			created := a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "cmd-create"})
			v.setup(a)

			// Sync IM failure: the command still succeeds and its state is there.
			a.fakeIM.FailNext(1, 10002, "internal error")
			res := v.command(a, "cmd-1")
			v.applied(t, res.Room)
			v.applied(t, a.snapshot("room-1"))
			imEvent := res.EventIDs[0]
			require.Equal(t, v.imType, a.record(imEvent).Type)

			// The event stays pending; the failed sync publish is no retry.
			r := a.record(imEvent)
			require.Equal(t, outbox.StatusPending, r.Status)
			require.Zero(t, r.Attempts)

			// A failed worker attempt: retry_count+1 and last_error.
			a.fakeIM.FailNext(1, 10002, "internal error")
			require.Equal(t, outbox.BatchResult{Claimed: 1, Retried: 1}, a.processBatch())
			r = a.record(imEvent)
			require.Equal(t, outbox.StatusPending, r.Status)
			require.Equal(t, 1, r.Attempts)
			require.Contains(t, r.LastError, "ErrorCode 10002")

			// Fail, then succeed: the worker republishes the same event_id.
			outboxtest.Eventually(t, "the worker publishes", func() bool { return a.processBatch().Published == 1 })
			r = a.record(imEvent)
			require.Equal(t, outbox.StatusPublished, r.Status)
			require.Equal(t, 1, r.Attempts)
			require.Equal(t, 1, a.imDeliveries()[imEvent], "IM got the same event_id, once")

			// Sync success: published at once, and the worker never sends it.
			res2 := v.command(a, "cmd-2")
			im2 := res2.EventIDs[0]
			require.Equal(t, outbox.StatusPublished, a.record(im2).Status)
			require.Zero(t, a.processBatch().Claimed)
			require.Equal(t, 1, a.imDeliveries()[im2])

			// Non-IM events are never sent to IM, but end published.
			nonIM := append(append([]string{created.EventIDs[0]}, res.EventIDs[1:]...), res2.EventIDs[1:]...)
			for _, id := range nonIM {
				r := a.record(id)
				require.Contains(t, noIMTypes, r.Type)
				require.Equal(t, outbox.StatusPublished, r.Status, "%s %s", r.Type, id)
				require.Zero(t, a.imDeliveries()[id], "%s went to IM", r.Type)
			}
			require.Zero(t, a.unpublished())
		})
	}
}

func TestRepeatedCommandIDReturnsTheFirstResultAndEmitsNothing(t *testing.T) {
	a := startApp(t, nil, nil)
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})
	first := a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c-join"})
	a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "carol", "command_id": "c-join-carol"})
	events := a.count("SELECT COUNT(*) FROM room_outbox")

	again := a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c-join"})
	require.Equal(t, first, again, "the first result, byte for byte")
	require.Equal(t, events, a.count("SELECT COUNT(*) FROM room_outbox"), "no new events")
	require.Equal(t, int64(3), a.snapshot("room-1").Version, "no state change")

	status, body := a.do("POST", "/v1/rooms/room-1/leave", `{"user_id":"bob","command_id":"c-join"}`)
	require.Equal(t, 409, status, "a command ID names one command: %s", body)
	require.Contains(t, string(body), "command_id_reused")
}

func TestBadInputGets4xxAndChangesNothing(t *testing.T) {
	a := startApp(t, nil, nil)
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})
	a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c-join"})
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"unknown room", "POST", "/v1/rooms/no-such-room/join", `{"user_id":"bob","command_id":"x1"}`, 404, "not_found"},
		{"unknown room snapshot", "GET", "/v1/rooms/no-such-room", ``, 404, "not_found"},
		{"missing user", "POST", "/v1/rooms/room-1/join", `{"command_id":"x2"}`, 400, "missing_field"},
		{"missing command id", "POST", "/v1/rooms/room-1/join", `{"user_id":"dave"}`, 400, "missing_field"},
		{"missing owner", "POST", "/v1/rooms", `{"room_id":"room-2","command_id":"x3"}`, 400, "missing_field"},
		{"malformed JSON", "POST", "/v1/rooms/room-1/join", `{"user_id":`, 400, "malformed_json"},
		{"not an object", "POST", "/v1/rooms/room-1/join", `["bob"]`, 400, "malformed_json"},
		{"two objects", "POST", "/v1/rooms/room-1/join", `{"user_id":"dave","command_id":"x4"}{}`, 400, "malformed_json"},
		{"unknown field", "POST", "/v1/rooms/room-1/join", `{"user_id":"dave","command_id":"x5","gift_id":"rose"}`, 400, "malformed_json"},
		{"negative count", "POST", "/v1/rooms/room-1/gifts", `{"user_id":"bob","gift_id":"rose","count":-2,"command_id":"x6"}`, 400, "invalid_field"},
		{"zero count", "POST", "/v1/rooms/room-1/gifts", `{"user_id":"bob","gift_id":"rose","count":0,"command_id":"x7"}`, 400, "invalid_field"},
		{"missing count", "POST", "/v1/rooms/room-1/gifts", `{"user_id":"bob","gift_id":"rose","command_id":"x8"}`, 400, "missing_field"},
		{"unknown gift", "POST", "/v1/rooms/room-1/gifts", `{"user_id":"bob","gift_id":"yacht","count":1,"command_id":"x9"}`, 400, "invalid_field"},
		{"gift from a non-member", "POST", "/v1/rooms/room-1/gifts", `{"user_id":"erin","gift_id":"rose","count":1,"command_id":"x10"}`, 409, "not_member"},
		{"leaving a room one is not in", "POST", "/v1/rooms/room-1/leave", `{"user_id":"erin","command_id":"x11"}`, 409, "not_member"},
		{"joining twice", "POST", "/v1/rooms/room-1/join", `{"user_id":"bob","command_id":"x12"}`, 409, "already_member"},
		{"room exists", "POST", "/v1/rooms", `{"room_id":"room-1","owner_id":"zed","command_id":"x13"}`, 409, "room_exists"},
		{"bad room id", "POST", "/v1/rooms", `{"room_id":"room 1!","owner_id":"zed","command_id":"x14"}`, 400, "invalid_field"},
		{"bad user id", "POST", "/v1/rooms/room-1/join", `{"user_id":"a b","command_id":"x15"}`, 400, "invalid_field"},
		{"body too large", "POST", "/v1/rooms/room-1/join", `{"user_id":"` + strings.Repeat("a", maxBodyBytes) + `"}`, 413, "too_large"},
	}
	before := a.snapshot("room-1")
	events := a.count("SELECT COUNT(*) FROM room_outbox")
	commands := a.count("SELECT COUNT(*) FROM room_commands")
	for _, tc := range cases {
		status, body := a.do(tc.method, tc.path, tc.body)
		require.Equal(t, tc.status, status, "%s: %s", tc.name, body)
		require.Contains(t, string(body), fmt.Sprintf(`"code":%q`, tc.code), tc.name)
		require.Equal(t, before, a.snapshot("room-1"), "%s changed the room", tc.name)
		require.Equal(t, events, a.count("SELECT COUNT(*) FROM room_outbox"), "%s wrote events", tc.name)
		require.Equal(t, commands, a.count("SELECT COUNT(*) FROM room_commands"), "%s logged a command", tc.name)
	}
	require.Zero(t, a.count("SELECT COUNT(*) FROM rooms WHERE room_id <> 'room-1'"))
	// A rejected command ID is free for the real command afterwards.
	a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "dave", "command_id": "x2"})
}
