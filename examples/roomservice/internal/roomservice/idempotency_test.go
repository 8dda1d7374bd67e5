package roomservice

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCommandIDReusedForAnotherCommandIsRefused: a command ID names one
// command. The same ID with another user, gift or count is a 409, tells
// the caller nothing about the first caller, and changes nothing.
func TestCommandIDReusedForAnotherCommandIsRefused(t *testing.T) {
	a := startApp(t, nil, nil)
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})
	joined := a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c-join"})
	gift := a.command("/v1/rooms/room-1/gifts", map[string]any{"user_id": "bob", "gift_id": "heart", "count": 1, "command_id": "c-gift"})

	cases := []struct {
		name, path string
		body       map[string]any
	}{
		{"carol reuses bob's join", "/v1/rooms/room-1/join", map[string]any{"user_id": "carol", "command_id": "c-join"}},
		{"a gift of another count", "/v1/rooms/room-1/gifts", map[string]any{"user_id": "bob", "gift_id": "heart", "count": 9999, "command_id": "c-gift"}},
		{"a gift of another kind", "/v1/rooms/room-1/gifts", map[string]any{"user_id": "bob", "gift_id": "rocket", "count": 1, "command_id": "c-gift"}},
		{"a gift of another gift and count", "/v1/rooms/room-1/gifts", map[string]any{"user_id": "bob", "gift_id": "rocket", "count": 9999, "command_id": "c-gift"}},
	}
	before := a.snapshot("room-1")
	events := a.count("SELECT COUNT(*) FROM room_outbox")
	for _, tc := range cases {
		status, body := a.do(http.MethodPost, tc.path, jsonBody(tc.body))
		require.Equal(t, http.StatusConflict, status, "%s: %s", tc.name, body)
		var resp struct {
			Error apiError `json:"error"`
		}
		require.NoError(t, json.Unmarshal(body, &resp), tc.name)
		require.Equal(t, "command_id_reused", resp.Error.Code, tc.name)
		require.NotContains(t, resp.Error.Message, "bob", "%s: the message names the first caller", tc.name)
		require.Equal(t, before, a.snapshot("room-1"), "%s changed the room", tc.name)
		require.Equal(t, events, a.count("SELECT COUNT(*) FROM room_outbox"), "%s wrote events", tc.name)
	}
	require.Zero(t, a.count("SELECT COUNT(*) FROM room_members WHERE user_id = 'carol'"))

	// The same commands again replay; carol joins with an ID of her own.
	require.Equal(t, joined, a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c-join"}))
	require.Equal(t, gift, a.command("/v1/rooms/room-1/gifts", map[string]any{"user_id": "bob", "gift_id": "heart", "count": 1, "command_id": "c-gift"}))
	a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "carol", "command_id": "c-join-carol"})
	require.Equal(t, 1, a.count("SELECT COUNT(*) FROM room_members WHERE user_id = 'carol'"))
}

// TestConcurrentRepeatsOfOneCommandApplyItOnce: the same command sent by
// many clients at once is applied once; everyone gets its result.
func TestConcurrentRepeatsOfOneCommandApplyItOnce(t *testing.T) {
	a := startApp(t, nil, nil)
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})
	events := a.count("SELECT COUNT(*) FROM room_outbox")

	const n = 12
	type outcome struct {
		res Result
		err error
	}
	start := make(chan struct{})
	results := make(chan outcome, n)
	for range n {
		go func() {
			<-start
			res, err := a.tryCommand("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c-join"})
			results <- outcome{res, err}
		}()
	}
	close(start)
	var first Result
	for i := range n {
		o := <-results
		require.NoError(t, o.err)
		if i == 0 {
			first = o.res
		}
		require.Equal(t, first, o.res, "every caller gets the one result")
	}
	require.Len(t, first.EventIDs, 2)
	require.Equal(t, events+2, a.count("SELECT COUNT(*) FROM room_outbox"), "applied once")
	require.Equal(t, int64(2), a.snapshot("room-1").Version)
	require.Equal(t, 1, a.count("SELECT COUNT(*) FROM room_members"))
}

// TestConcurrentReusesOfOneCommandIDApplyOneCommand: many different
// commands under one ID at once: one applies, the rest are 409s.
func TestConcurrentReusesOfOneCommandIDApplyOneCommand(t *testing.T) {
	a := startApp(t, nil, nil)
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})

	const n = 12
	start := make(chan struct{})
	statuses := make(chan int, n)
	for i := range n {
		go func() {
			<-start
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+a.Addr()+"/v1/rooms/room-1/join",
				strings.NewReader(jsonBody(map[string]any{"user_id": fmt.Sprintf("u%d", i), "command_id": "c-join"})))
			if err != nil {
				statuses <- -1
				return
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- -1
				return
			}
			resp.Body.Close()
			statuses <- resp.StatusCode
		}()
	}
	close(start)
	got := map[int]int{}
	for range n {
		got[<-statuses]++
	}
	require.Equal(t, map[int]int{http.StatusOK: 1, http.StatusConflict: n - 1}, got)
	require.Equal(t, 1, a.count("SELECT COUNT(*) FROM room_members"))
}

// TestCommandLogStaysBoundedAsARoomGrows: the stored response does not
// grow with the room, and every join succeeds however big it gets.
func TestCommandLogStaysBoundedAsARoomGrows(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 joins")
	}
	a := startApp(t, nil, nil)
	ctx := context.Background()
	_, err := a.svc.Execute(ctx, Command{Kind: KindCreate, CommandID: "c-create", RoomID: "room-1", UserID: "alice"})
	require.NoError(t, err)
	const joins = 2000
	for i := range joins {
		id := fmt.Sprintf("%05d", i)
		_, err := a.svc.Execute(ctx, Command{Kind: KindJoin, CommandID: "c-join-" + id, RoomID: "room-1", UserID: "user-" + id})
		require.NoError(t, err, "join %d", i)
	}
	require.Equal(t, joins, a.count("SELECT COUNT(*) FROM room_members WHERE room_id = 'room-1'"))

	avg := func(order string) float64 {
		var v float64
		require.NoError(t, a.db.DB.QueryRow("SELECT AVG(len) FROM (SELECT LENGTH(response) AS len FROM room_commands"+
			" WHERE kind = 'join' ORDER BY command_id "+order+" LIMIT 100) AS t").Scan(&v))
		return v
	}
	first, last := avg("ASC"), avg("DESC")
	t.Logf("stored response: first 100 joins %.0f bytes on average, last 100 %.0f", first, last)
	// The slack covers the numbers' extra digits (heat, version, member_count).
	require.LessOrEqual(t, last, first+16, "the stored response grows with the room")
	require.LessOrEqual(t, a.count("SELECT MAX(LENGTH(response)) FROM room_commands"), 2048)
}
