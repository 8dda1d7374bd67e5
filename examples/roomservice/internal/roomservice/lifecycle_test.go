package roomservice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// TestShutdownOrder proves the seed's order with real work in flight: a
// worker publish hanging at Tencent IM, and an HTTP command blocked on its
// room's row lock. If MySQL closed before the worker stopped, the hung
// publish's outcome would be lost; if it closed before HTTP shut down, the
// command would fail. Neither may happen.
func TestShutdownOrder(t *testing.T) {
	on := true
	a := startApp(t, nil, func(c *Config) {
		c.OutboxWorker.Enabled = &on
		// Long enough that the hung publish is surely seen in flight.
		c.OutboxWorker.PublishTimeout = 2 * time.Second
	})
	ctx := context.Background()
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})
	readyz := func() int {
		rec := httptest.NewRecorder()
		a.server.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	require.Equal(t, http.StatusOK, readyz())

	// 1. A worker publish in flight: IM does not answer.
	a.fakeIM.HangNext(1)
	require.NoError(t, a.store.Enqueue(ctx, a.db.DB, nil, outbox.Message{ID: "hung-1", Key: "room-1", Type: RoomUserJoined, Payload: []byte(`{}`)}))
	outboxtest.Eventually(t, "the worker's publish hangs at IM", func() bool { return a.fakeIM.InFlight() == 1 })

	// 2. A command in flight: the test holds room-1's row lock.
	lock, err := a.db.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lock.Rollback() }) // on a failure path too, or shutdown would wait on it
	_, err = lock.ExecContext(ctx, "SELECT * FROM rooms WHERE room_id = 'room-1' FOR UPDATE")
	require.NoError(t, err)
	type reply struct {
		status int
		body   []byte
	}
	replied := make(chan reply, 1)
	go func() {
		status, body := a.do(http.MethodPost, "/v1/rooms/room-1/join", `{"user_id":"bob","command_id":"c-bob"}`)
		replied <- reply{status, body}
	}()
	outboxtest.Eventually(t, "the command waits for the room lock", func() bool {
		// Not counting this query itself, whose text matches the pattern too.
		return a.count("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()"+
			" AND INFO LIKE '%FROM rooms WHERE room_id%FOR UPDATE%'", a.db.Name) == 1
	})

	// 3. Shut down while both are in flight.
	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		stopped <- a.Shutdown(sctx)
	}()
	outboxtest.Eventually(t, "draining", func() bool { return a.State() == stateDraining })
	require.Equal(t, http.StatusServiceUnavailable, readyz(), "/readyz answers 503 while draining")
	outboxtest.Eventually(t, "the worker stops", func() bool { return contains(a.Lifecycle(), "outbox worker stopped") })
	require.NotContains(t, a.Lifecycle(), "http server stopped", "HTTP waits for the command in flight")

	// 4. Let the command go on; it commits and answers, then MySQL closes.
	require.NoError(t, lock.Rollback())
	r := <-replied
	require.Equal(t, http.StatusOK, r.status, "the in-flight command finished: %s", r.body)
	require.NoError(t, <-stopped)
	require.Equal(t, []string{"draining: /readyz answers 503", "outbox worker stopped", "http server stopped", "mysql closed"}, a.Lifecycle())
	require.ErrorContains(t, a.App.db.Ping(), "database is closed")

	// Checked through the test's own pool, after the App closed its own.
	var attempts int
	var lastError string
	require.NoError(t, a.db.DB.QueryRow("SELECT retry_count, last_error FROM room_outbox WHERE event_id = 'hung-1'").Scan(&attempts, &lastError))
	require.Equal(t, 1, attempts, "the in-flight publish ended at publish_timeout and was recorded before MySQL closed")
	require.Contains(t, lastError, "timed out")
	require.Equal(t, 1, a.count("SELECT COUNT(*) FROM room_members WHERE room_id = 'room-1' AND user_id = 'bob'"), "the command committed")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestTwoInstancesShareRoomsSafely runs two room-service instances on one
// database: commands on one room from both are applied one at a time, no
// event ID repeats, and the two workers deliver every IM event once.
func TestTwoInstancesShareRoomsSafely(t *testing.T) {
	db := testutil.NewDatabase(t)
	on := true
	apps := make([]*testApp, 2)
	for i := range apps {
		apps[i] = startApp(t, db, func(c *Config) {
			c.NodeID = fmt.Sprintf("node-%d", i)
			c.OutboxWorker.Enabled = &on
		})
	}
	apps[0].command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})

	const users = 30
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		events   = map[string]bool{}
		failures []error
	)
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := apps[i%2]
			user := fmt.Sprintf("u%d", i)
			res, err := a.tryCommand("/v1/rooms/room-1/join", map[string]any{"user_id": user, "command_id": "join-" + user})
			res2, err2 := a.tryCommand("/v1/rooms/room-1/gifts", map[string]any{"user_id": user, "gift_id": "heart", "count": 1, "command_id": "gift-" + user})
			mu.Lock()
			defer mu.Unlock()
			failures = append(failures, errors.Join(err, err2))
			for _, id := range append(res.EventIDs, res2.EventIDs...) {
				if events[id] {
					failures = append(failures, fmt.Errorf("event ID %s issued twice", id))
				}
				events[id] = true
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(failures...))
	s := apps[1].snapshot("room-1")
	require.Len(t, s.Members, users)
	require.Equal(t, int64(users*heatPerMember+users*1), s.Heat, "no lost update under concurrency")
	require.Equal(t, int64(1+2*users), s.Version)
	require.Len(t, events, users*5)

	outboxtest.Eventually(t, "every event is published", func() bool {
		return apps[0].count("SELECT COUNT(*) FROM room_outbox WHERE status <> 'published'") == 0
	})
	delivered := map[string]int{}
	for _, a := range apps {
		for id, n := range a.imDeliveries() {
			delivered[id] += n
		}
	}
	require.Len(t, delivered, users*2, "every join and gift reached IM")
	for id, n := range delivered {
		require.Equal(t, 1, n, "event %s reached IM %d times", id, n)
		require.True(t, strings.Count(id, "-") == 4, "a UUID")
	}
}
