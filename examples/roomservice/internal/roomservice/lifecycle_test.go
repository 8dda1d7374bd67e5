package roomservice

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// TestShutdownOrder proves the shutdown order with real work in flight:
// an HTTP command blocked on its room's row lock while the shutdown
// begins, and a worker publish hanging at Tencent IM while HTTP drains.
// Readiness fails first; HTTP drains while the worker still delivers; the
// worker stops once no command can add work, and records its in-flight
// publish; MySQL closes last. If MySQL closed before the worker stopped,
// the hung publish's outcome would be lost; if it closed before HTTP
// drained, the command would fail. Neither may happen.
func TestShutdownOrder(t *testing.T) {
	on := true
	a := startApp(t, nil, func(c *Config) {
		c.OutboxWorker.Enabled = &on
		c.OutboxWorker.PublishTimeout = 2 * time.Second
		// A failed publish is not retried within the test, so that its
		// record is the same whenever the publish times out.
		c.OutboxWorker.RetryInterval = time.Hour
	})
	ctx := context.Background()
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})
	readyz := func() int {
		status, _ := a.do(http.MethodGet, "/readyz", "")
		return status
	}
	require.Equal(t, http.StatusOK, readyz())

	// 1. A command in flight: the test holds room-1's row lock.
	release := holdRoomLock(t, a, "room-1")
	replied := a.postAsync("/v1/rooms/room-1/join", `{"user_id":"bob","command_id":"c-bob"}`)
	waitForLockWaiters(t, a, 1)

	// 2. Shut down while it is in flight.
	stopped := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		stopped <- a.Shutdown(sctx)
	}()
	outboxtest.Eventually(t, "the drain delay is over", func() bool { return contains(a.Lifecycle(), stepDrainDelay) })
	require.Equal(t, svckit.StateDraining, a.State())
	require.Equal(t, http.StatusServiceUnavailable, readyzOn(t, a.AdminAddr()), "/readyz answers 503 while draining")
	require.NotContains(t, a.Lifecycle(), stepHTTPStopped, "HTTP waits for the command in flight")

	// 3. The worker still delivers while HTTP drains: a publish in
	// flight, hanging at IM.
	a.fakeIM.HangNext(1)
	require.NoError(t, a.store.Enqueue(ctx, a.db.DB, nil, outbox.Message{ID: "hung-1", Key: "room-1", Type: RoomUserJoined, Payload: []byte(`{}`)}))
	outboxtest.Eventually(t, "the worker's publish hangs at IM", func() bool { return a.fakeIM.InFlight() == 1 })
	require.NotContains(t, a.Lifecycle(), stepWorker)

	// 4. Let the command go on; it commits and answers, then HTTP stops,
	// then the worker, then MySQL.
	release()
	r := <-replied
	require.NoError(t, r.err, "the in-flight command was answered")
	require.Equal(t, http.StatusOK, r.status, "the in-flight command finished: %s", r.body)
	require.NoError(t, <-stopped)
	require.Equal(t, []string{stepDraining, stepDrainDelay, stepHTTPStopped, stepWorker, stepMySQL}, a.Lifecycle())
	require.Equal(t, []string{"draining: /readyz answers 503", "drain delay over", "http server stopped", "outbox worker stopped", "mysql closed"},
		a.Lifecycle(), "the words the demo prints and operators read in the log")
	require.ErrorContains(t, a.App.db.Ping(), "database is closed")

	// Checked through the test's own pool, after the App closed its own.
	s, err := mysql.New(a.db.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(t, err)
	hung, err := s.Get(context.Background(), "hung-1")
	require.NoError(t, err)
	require.Equal(t, 1, hung.Attempts, "the in-flight publish ended at publish_timeout and was recorded before MySQL closed")
	require.Contains(t, hung.LastError, "timed out")
	require.Equal(t, 1, a.count("SELECT COUNT(*) FROM room_members WHERE room_id = 'room-1' AND user_id = 'bob'"), "the command committed")
}

// readyzOn GETs /readyz at addr and returns the status.
func readyzOn(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestDrainDelayFailsReadinessButStillServes: during the drain delay
// /readyz answers 503 on both listeners while new requests, on new
// connections, are still served; the delay ends when the shutdown's
// context does.
func TestDrainDelayFailsReadinessButStillServes(t *testing.T) {
	long := time.Hour // ended by the context below
	a := startApp(t, nil, func(c *Config) { c.HTTP.DrainDelay = &long })
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- a.Shutdown(ctx) }()
	outboxtest.Eventually(t, "draining", func() bool { return contains(a.Lifecycle(), stepDraining) })

	require.Equal(t, http.StatusServiceUnavailable, readyzOn(t, a.Addr()))
	require.Equal(t, http.StatusServiceUnavailable, readyzOn(t, a.AdminAddr()))
	// A client whose load balancer has not caught up yet is still served.
	// A transport of its own: no idle connection from before the drain.
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	fresh := &http.Client{Transport: transport}
	req, err := http.NewRequest(http.MethodPost, "http://"+a.Addr()+"/v1/rooms/room-1/join", strings.NewReader(`{"user_id":"bob","command_id":"c-bob"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := fresh.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, resp.Close, "draining: the server closes connections after answering")
	require.Equal(t, []string{stepDraining}, a.Lifecycle(), "still in the drain delay")

	cancel()
	err = <-stopped
	require.True(t, err == nil || errors.Is(err, context.Canceled), "%v", err)
	require.Equal(t, []string{stepDraining, stepDrainDelay, stepHTTPStopped, stepWorker, stepMySQL}, a.Lifecycle())
	require.Equal(t, 1, a.count("SELECT COUNT(*) FROM room_members WHERE user_id = 'bob'"))
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
		return apps[0].unpublished() == 0
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
