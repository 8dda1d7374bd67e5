package roomservice

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

func TestCommandDigest(t *testing.T) {
	gift := Command{Kind: KindGift, CommandID: "c1", RoomID: "room-1", UserID: "bob", GiftID: "heart", Count: 1}
	// Pinned: a changed encoding would refuse every retry of every
	// command logged before it (see commandDigestVersion).
	require.Equal(t, "6e03f17f949c6e339981853b39a64127ddad07208f06c62d8afe2450ff65d9b8", hex.EncodeToString(commandDigest(gift)))

	same := []struct {
		name string
		cmd  Command
	}{
		{"another command ID", func() Command { c := gift; c.CommandID = "c2"; return c }()},
		{"another request ID and trace", func() Command { c := gift; c.RequestID, c.TraceParent = "r", "tp"; return c }()},
	}
	for _, tc := range same {
		require.Equal(t, commandDigest(gift), commandDigest(tc.cmd), tc.name)
	}
	join := Command{Kind: KindJoin, RoomID: "room-1", UserID: "bob"}
	require.Equal(t, commandDigest(join), commandDigest(Command{Kind: KindJoin, RoomID: "room-1", UserID: "bob", GiftID: "x", Count: 3}),
		"gift fields do not count for a join")

	different := []struct {
		name string
		a, b Command
	}{
		{"user", gift, func() Command { c := gift; c.UserID = "carol"; return c }()},
		{"room", gift, func() Command { c := gift; c.RoomID = "room-2"; return c }()},
		{"gift", gift, func() Command { c := gift; c.GiftID = "rocket"; return c }()},
		{"count", gift, func() Command { c := gift; c.Count = 9999; return c }()},
		{"kind", join, Command{Kind: KindLeave, RoomID: "room-1", UserID: "bob"}},
		{"field boundaries", Command{Kind: KindJoin, RoomID: "ab", UserID: "c"}, Command{Kind: KindJoin, RoomID: "a", UserID: "bc"}},
	}
	for _, tc := range different {
		require.NotEqual(t, commandDigest(tc.a), commandDigest(tc.b), tc.name)
	}
}

// TestRoomMembersArePaged: GET /v1/rooms/{id} shows the first page and
// a cursor; the members endpoint pages through the rest on the key.
func TestRoomMembersArePaged(t *testing.T) {
	a := startApp(t, nil, nil)
	ctx := context.Background()
	_, err := a.svc.Execute(ctx, Command{Kind: KindCreate, CommandID: "c-create", RoomID: "room-1", UserID: "alice"})
	require.NoError(t, err)
	const users = 250
	var want []string
	for i := range users {
		u := fmt.Sprintf("user-%03d", i)
		want = append(want, u)
		_, err := a.svc.Execute(ctx, Command{Kind: KindJoin, CommandID: "c-" + u, RoomID: "room-1", UserID: u})
		require.NoError(t, err)
	}

	// A command's result counts the members and lists none.
	status, body := a.do(http.MethodPost, "/v1/rooms/room-1/join", `{"user_id":"zed","command_id":"c-zed"}`)
	require.Equal(t, http.StatusOK, status, string(body))
	require.NotContains(t, string(body), `"members"`)
	require.Contains(t, string(body), fmt.Sprintf(`"member_count":%d`, users+1))
	want = append(want, "zed")

	s := a.snapshot("room-1")
	require.Equal(t, int64(users+1), s.MemberCount)
	require.Equal(t, want[:membersPageSize], s.Members)
	require.Equal(t, want[membersPageSize-1], s.NextAfter)

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/rooms/{room_id}/members", a.handleListMembers)
	get := func(query string) (int, membersPageResponse, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/rooms/room-1/members"+query, nil))
		var page membersPageResponse
		_ = json.Unmarshal(rec.Body.Bytes(), &page)
		return rec.Code, page, rec.Body.String()
	}
	got := append([]string(nil), s.Members...)
	for after, pages := s.NextAfter, 0; after != ""; pages++ {
		require.Less(t, pages, 10)
		code, page, raw := get("?limit=70&after=" + url.QueryEscape(after))
		require.Equal(t, http.StatusOK, code, raw)
		require.LessOrEqual(t, len(page.Members), 70)
		got = append(got, page.Members...)
		after = page.NextAfter
	}
	require.Equal(t, want, got, "every member once, in order")

	code, page, _ := get("?limit=500")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, want, page.Members)
	require.Empty(t, page.NextAfter, "the last page has no cursor")
	code, page, _ = get("")
	require.Equal(t, http.StatusOK, code)
	require.Len(t, page.Members, membersPageSize)

	for _, q := range []string{"?limit=0", "?limit=501", "?limit=abc", "?limit=-1", "?after=a%20b", "?after=%ff%00", "?after=" + strings.Repeat("a", 4000)} {
		code, _, raw := get(q)
		require.Equal(t, http.StatusBadRequest, code, "%s: %s", q, raw)
		require.Contains(t, raw, `"code":"invalid_field"`, q)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/rooms/no-such-room/members", nil))
	require.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
}

// fakeClock is a clock the test moves.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(t.UnixMilli())
	return c
}

func (c *fakeClock) Now() time.Time                { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Advance(d time.Duration)       { c.ms.Add(d.Milliseconds()) }
func (c *fakeClock) Set(t time.Time)               { c.ms.Store(t.UnixMilli()) }
func (a *testApp) serviceAt(c *fakeClock) *Service { s := *a.svc; s.now = c.Now; return &s }

func TestPurgeCommandsDeletesInBatches(t *testing.T) {
	a := startApp(t, nil, nil)
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := newFakeClock(t0)
	svc := a.serviceAt(clock)
	_, err := svc.Execute(ctx, Command{Kind: KindCreate, CommandID: "c-create", RoomID: "room-1", UserID: "alice"})
	require.NoError(t, err)
	for i := range 9 { // at t0+1s … t0+9s
		clock.Advance(time.Second)
		_, err := svc.Execute(ctx, Command{Kind: KindJoin, CommandID: fmt.Sprintf("c-%d", i), RoomID: "room-1", UserID: fmt.Sprintf("u%d", i)})
		require.NoError(t, err)
	}
	cases := []struct {
		name      string
		olderThan time.Duration // after t0
		batch     int
		deleted   int64
	}{
		{"nothing is old enough", 0, 2, 0},
		{"a batch boundary: exactly two batches, then an empty one", 4 * time.Second, 2, 4}, // c-create, c-0 … c-2
		{"a partial last batch", 7 * time.Second, 2, 3},
		{"one batch bigger than the rest", time.Hour, 1000, 3},
		{"none left", time.Hour, 1, 0},
	}
	for _, tc := range cases {
		n, err := svc.PurgeCommands(ctx, t0.Add(tc.olderThan), tc.batch)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.deleted, n, tc.name)
	}
	require.Zero(t, a.count("SELECT COUNT(*) FROM room_commands"))
	_, err = svc.PurgeCommands(ctx, t0, 0)
	require.ErrorContains(t, err, "batch 0")
}

// TestCommandRetention: within retention a repeat replays; once purged,
// the same command ID runs anew.
func TestCommandRetention(t *testing.T) {
	a := startApp(t, nil, nil)
	ctx := context.Background()
	cfg := a.cfg.Commands
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := newFakeClock(t0)
	svc := a.serviceAt(clock)
	for _, c := range []Command{
		{Kind: KindCreate, CommandID: "c-create", RoomID: "room-1", UserID: "alice"},
		{Kind: KindJoin, CommandID: "c-join", RoomID: "room-1", UserID: "bob"},
	} {
		_, err := svc.Execute(ctx, c)
		require.NoError(t, err)
	}
	gift := Command{Kind: KindGift, CommandID: "c-gift", RoomID: "room-1", UserID: "bob", GiftID: "rose", Count: 2}
	first, err := svc.Execute(ctx, gift)
	require.NoError(t, err)

	clock.Set(t0.Add(cfg.Retention - time.Minute))
	n, err := svc.PurgeCommands(ctx, clock.Now().Add(-cfg.Retention), cfg.RetentionBatch)
	require.NoError(t, err)
	require.Zero(t, n)
	again, err := svc.Execute(ctx, gift)
	require.NoError(t, err)
	require.Equal(t, first, again, "within retention: the first result")

	clock.Set(t0.Add(cfg.Retention + time.Minute))
	n, err = svc.PurgeCommands(ctx, clock.Now().Add(-cfg.Retention), cfg.RetentionBatch)
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	anew, err := svc.Execute(ctx, gift)
	require.NoError(t, err)
	require.NotEqual(t, first.EventIDs, anew.EventIDs, "past retention: the command runs again")
	require.Equal(t, first.Room.Heat+10, anew.Room.Heat)
}

// TestRunCommandRetention purges on its interval and returns when its
// context ends.
func TestRunCommandRetention(t *testing.T) {
	a := startApp(t, nil, nil)
	ctx := context.Background()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := newFakeClock(t0)
	svc := a.serviceAt(clock)
	_, err := svc.Execute(ctx, Command{Kind: KindCreate, CommandID: "c-create", RoomID: "room-1", UserID: "alice"})
	require.NoError(t, err)
	for i := range 5 {
		_, err := svc.Execute(ctx, Command{Kind: KindJoin, CommandID: fmt.Sprintf("c-%d", i), RoomID: "room-1", UserID: fmt.Sprintf("u%d", i)})
		require.NoError(t, err)
	}
	cfg := CommandsConfig{Retention: time.Hour, RetentionInterval: 10 * time.Millisecond, RetentionBatch: 2}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.RunCommandRetention(runCtx, cfg)
	}()
	t.Cleanup(func() { cancel(); <-done })

	clock.Set(t0.Add(2 * time.Hour))
	outboxtest.Eventually(t, "old commands are purged", func() bool { return a.count("SELECT COUNT(*) FROM room_commands") == 0 })

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunCommandRetention did not return after its context ended")
	}
}

// TestReplayEndsItsTransaction: a replay gives its connection back (and
// with it the lock its duplicate insert took) before it returns, not when
// the caller's context ends.
func TestReplayEndsItsTransaction(t *testing.T) {
	a := startApp(t, nil, nil)
	ctx := context.Background() // never ends
	for range 2 {
		for _, c := range []Command{
			{Kind: KindCreate, CommandID: "c-create", RoomID: "room-1", UserID: "alice"},
			{Kind: KindJoin, CommandID: "c-join", RoomID: "room-1", UserID: "bob"},
		} {
			_, err := a.svc.Execute(ctx, c)
			require.NoError(t, err)
		}
	}
	// Other parts of the running App (its probes, say) take a connection
	// now and then; a replay that kept its transaction would hold one for
	// good, since ctx never ends.
	outboxtest.Eventually(t, "no connection is left in use", func() bool { return a.App.db.Stats().InUse == 0 })
	n, err := a.svc.PurgeCommands(ctx, time.Now().Add(time.Hour), 10)
	require.NoError(t, err, "no lock held up the purge")
	require.Equal(t, int64(2), n)
}

// TestTheAppPurgesItsCommandLog: the running App deletes commands past
// commands.retention, and keeps the recent ones, until it stops.
func TestTheAppPurgesItsCommandLog(t *testing.T) {
	a := startApp(t, nil, func(c *Config) { c.Commands.RetentionInterval = 20 * time.Millisecond })
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-recent"})
	old := time.Now().Add(-DefaultCommandRetention - time.Hour).UnixMilli()
	_, err := a.db.DB.Exec("INSERT INTO room_commands (command_id, room_id, kind, created_at_ms) VALUES ('c-old', 'room-1', 'join', ?)", old)
	require.NoError(t, err)
	outboxtest.Eventually(t, "the old command is purged", func() bool {
		return a.count("SELECT COUNT(*) FROM room_commands WHERE command_id = 'c-old'") == 0
	})
	require.Equal(t, 1, a.count("SELECT COUNT(*) FROM room_commands WHERE command_id = 'c-recent'"), "within retention: kept")
}
