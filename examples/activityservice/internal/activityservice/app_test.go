package activityservice

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/outboxrelay/outboxrelay/examples/internal/natstest"
	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

// TestAppConsumesRoomEvents runs activity-service in process against a
// stream of the test's, fed through sink/natsjs as room-service feeds
// it: applied events, an ignored type, an unknown type and malformed
// payloads. Every message is acknowledged (no poison
// loop), each outcome counted, the totals and the level-up are exact,
// and Shutdown leaves no goroutine behind.
func TestAppConsumesRoomEvents(t *testing.T) {
	// Registered first, so it runs after every other cleanup; testutil's
	// pool on the server lives as long as the test binary.
	testutil.ServerDSN(t)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { testutil.VerifyNoLeaks(t, ignore) })
	run := natstest.RunID()
	js := natstest.JetStream(t)
	ctx := context.Background()
	rooms, levelUps := "AS_ROOMS_"+run, "AS_ACT_"+run
	_, err := js.CreateStream(ctx, natsjs.StreamConfig(rooms, "as_"+run+".rooms", time.Minute))
	require.NoError(t, err)
	natstest.DeleteStreamsAtCleanup(t, js, rooms, levelUps)

	db := testutil.NewDatabase(t)
	noDrain := time.Duration(0)
	cfg := Config{
		NodeID: "test", HTTP: HTTPConfig{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", DrainDelay: &noDrain},
		MySQL: MySQLConfig{DSN: db.DSN},
		Rooms: RoomsConfig{NATSURL: natstest.URL(), Stream: rooms, SubjectPrefix: "as_" + run + ".rooms", AckWait: 2 * time.Second,
			FetchWait: 100 * time.Millisecond, RetryDelay: 100 * time.Millisecond, StartupTimeout: 10 * time.Second},
		Levels: []int64{10, 100},
		Outbox: OutboxConfig{Stream: levelUps, SubjectPrefix: "as_" + run + ".activity", PollInterval: 50 * time.Millisecond},
	}.WithDefaults()
	require.NoError(t, cfg.Validate())
	app, err := NewApp(ctx, cfg, outboxtest.Logger(t))
	require.NoError(t, err)
	require.NoError(t, app.Start())
	t.Cleanup(func() { // after a failure too, so the leak check reports only a leak
		if app.State() != svckit.StateStopped {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = app.Shutdown(ctx)
		}
	})

	sink, err := natsjs.New(natsjs.Config{JetStream: js, Prefix: cfg.Rooms.SubjectPrefix})
	require.NoError(t, err)
	publish := func(id, typ, room, data string) {
		payload := fmt.Sprintf(`{"event_id":%q,"event_type":%q,"room_id":%q,"data":%s}`, id, typ, room, data)
		require.NoError(t, sink.Publish(ctx, outbox.Message{ID: id, Key: room, Type: typ, Payload: []byte(payload)}))
	}
	publish("e1", RoomCreated, "r1", `{"owner_id":"host"}`)
	publish("e2", RoomUserJoined, "r1", `{"user_id":"fan","member_count":1}`)
	publish("e3", RoomGiftSent, "r1", `{"user_id":"fan","gift_id":"car","count":1,"points":50}`)
	publish("e4", RoomHeatChanged, "r1", `{"heat":60}`)
	publish("e5", "RoomRenamed", "r1", `{"name":"x"}`)
	publish("e6", RoomGiftSent, "r1", `{"user_id":"fan","count":"many"}`)
	publish("e7", RoomUserJoined, "r1", `not json`)
	cons, err := js.Consumer(ctx, rooms, cfg.Rooms.Durable)
	require.NoError(t, err)
	outboxtest.Eventually(t, "every message acknowledged", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == 7
	})
	// A message's outcome is counted once the server has confirmed its
	// ack, so the last count can follow the ack floor by a moment.
	want := []string{`inbox_processed_total{consumer="activity-service"} 3`}
	for outcome, n := range map[string]int{"processed": 3, "ignored": 1, "unknown": 1, "malformed": 2} {
		want = append(want, fmt.Sprintf("activity_deliveries_total{outcome=%q} %d", outcome, n))
	}
	var counted []string
	defer func() {
		if t.Failed() {
			t.Logf("counted: %q", counted)
		}
	}()
	outboxtest.Eventually(t, "every outcome counted", func() bool {
		counted = countLines(scrape(t, app.AdminAddr()), "activity_deliveries_total{", "inbox_processed_total{")
		return assert.Subset(noT{}, counted, want)
	})

	// A redelivery of an applied event (here, processed again through the
	// inbox directly, as a second instance would) changes nothing.
	res, err := app.inbox.Process(ctx, "e3", func(context.Context, *sql.Tx) error { return fmt.Errorf("must not run") })
	require.NoError(t, err)
	require.Equal(t, "duplicate", res.String())

	fan := getJSON[Activity](t, "http://"+app.Addr()+"/users/fan/activity")
	require.Equal(t, Activity{UserID: "fan", Level: 1, GiftsSent: GiftTotals{1, 1, 50}, RoomsJoined: 1, Joins: 1}, fan)
	host := getJSON[Activity](t, "http://"+app.Addr()+"/users/host/activity")
	require.Equal(t, GiftTotals{1, 1, 50}, host.GiftsReceived)
	resp, err := http.Get("http://" + app.Addr() + "/users/nobody/activity")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	ups, err := js.Stream(ctx, levelUps)
	require.NoError(t, err)
	outboxtest.Eventually(t, "the level-up published", func() bool {
		info, err := ups.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	raw, err := ups.GetMsg(ctx, 1)
	require.NoError(t, err)
	var up LevelUp
	require.NoError(t, json.Unmarshal(raw.Data, &up))
	require.Equal(t, LevelUp{EventID: up.EventID, EventType: UserLevelUp, UserID: "fan", Level: 1, Threshold: 10, PointsSent: 50,
		CauseEventID: "e3", OccurredAtMs: up.OccurredAtMs}, up)
	require.Equal(t, cfg.Outbox.SubjectPrefix+".UserLevelUp.fan", raw.Subject)

	shutdownCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, app.Shutdown(shutdownCtx))
	require.Equal(t, svckit.StateStopped, app.State())
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// countLines returns the lines of metrics that start with one of the
// prefixes.
func countLines(metrics string, prefixes ...string) []string {
	var lines []string
	for _, line := range strings.Split(metrics, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// noT lets an assert function answer a poll without failing the test.
type noT struct{}

func (noT) Errorf(string, ...any) {}

func getJSON[T any](t *testing.T, url string) T {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var v T
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
	return v
}
