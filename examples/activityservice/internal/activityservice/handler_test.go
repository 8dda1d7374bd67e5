package activityservice

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
	inboxmysql "github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// fixture is the activity tables, the inbox and the outbox on a fresh
// database, and the projector the consumer uses.
type fixture struct {
	t     *testing.T
	db    *sql.DB
	inbox *inboxmysql.Inbox
	store *mysql.Store
	proj  *projector
}

func newFixture(t *testing.T, levels ...int64) *fixture {
	t.Helper()
	ctx := context.Background()
	d := testutil.NewDatabase(t)
	require.NoError(t, migrate(ctx, d.DB))
	ib, err := inboxmysql.New(d.DB, inboxmysql.Options{Consumer: InboxConsumer})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(ctx))
	store, err := mysql.New(d.DB, mysql.Options{Table: DefaultOutboxTable})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	return &fixture{t: t, db: d.DB, inbox: ib, store: store, proj: &projector{outbox: store, levels: levels, now: time.Now}}
}

// deliver processes ev through the inbox, as the consumer does.
func (f *fixture) deliver(ev roomEvent) (inbox.Result, error) {
	return f.inbox.Process(context.Background(), ev.ID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := f.proj.apply(ctx, tx, ev)
		return err
	})
}

func (f *fixture) activity(user string) Activity {
	f.t.Helper()
	act, err := readActivity(httptest.NewRequest("GET", "/", nil), f.db, user)
	require.NoError(f.t, err)
	return act
}

// levelUps returns the UserLevelUp events in the outbox, by user and
// level, counted.
func (f *fixture) levelUps() map[string]int {
	f.t.Helper()
	rows, err := f.db.Query("SELECT payload FROM activity_outbox WHERE event_type = ?", UserLevelUp)
	require.NoError(f.t, err)
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var payload []byte
		require.NoError(f.t, rows.Scan(&payload))
		var up LevelUp
		require.NoError(f.t, json.Unmarshal(payload, &up))
		n[fmt.Sprintf("%s/%d", up.UserID, up.Level)]++
	}
	require.NoError(f.t, rows.Err())
	return n
}

func gift(id, room, user string, count, points int64) roomEvent {
	return roomEvent{ID: id, Type: RoomGiftSent, RoomID: room, UserID: user, Count: count, Points: points}
}

// TestDuplicateDeliveryAbsorbed: every event type delivered twice counts
// once; the second delivery is a Duplicate that changes nothing.
func TestDuplicateDeliveryAbsorbed(t *testing.T) {
	f := newFixture(t, 100)
	events := []roomEvent{
		{ID: "e1", Type: RoomCreated, RoomID: "r1", UserID: "host"},
		{ID: "e2", Type: RoomUserJoined, RoomID: "r1", UserID: "fan"},
		gift("e3", "r1", "fan", 2, 10),
		{ID: "e4", Type: RoomUserLeft, RoomID: "r1", UserID: "fan"},
		{ID: "e5", Type: RoomUserJoined, RoomID: "r1", UserID: "fan"},
	}
	for _, ev := range events {
		res, err := f.deliver(ev)
		require.NoError(t, err)
		require.Equal(t, inbox.Processed, res)
	}
	for _, ev := range events {
		res, err := f.deliver(ev)
		require.NoError(t, err)
		require.Equal(t, inbox.Duplicate, res, ev.ID)
	}
	require.Equal(t, Activity{UserID: "fan", GiftsSent: GiftTotals{1, 2, 10}, RoomsJoined: 1, Joins: 2, Leaves: 1}, f.activity("fan"))
	require.Equal(t, Activity{UserID: "host", GiftsReceived: GiftTotals{1, 2, 10}, RoomsCreated: 1}, f.activity("host"))
}

// TestGiftBeforeRoomCreated: events of one room may arrive out of order
// (a redelivery overtakes); gifts received still reach the owner.
func TestGiftBeforeRoomCreated(t *testing.T) {
	f := newFixture(t)
	for _, ev := range []roomEvent{gift("g1", "r1", "fan", 1, 5), {ID: "c1", Type: RoomCreated, RoomID: "r1", UserID: "host"}, gift("g2", "r1", "fan", 3, 15)} {
		_, err := f.deliver(ev)
		require.NoError(t, err)
	}
	require.Equal(t, GiftTotals{2, 4, 20}, f.activity("host").GiftsReceived)
}

// TestLevelUpExactlyOnce: each threshold crossed gives one UserLevelUp,
// also when one gift crosses several, when gifts of one sender are
// applied concurrently, and when every gift is delivered twice.
func TestLevelUpExactlyOnce(t *testing.T) {
	f := newFixture(t, 10, 20, 50, 1000)
	// One gift of 25 crosses 10 and 20.
	_, err := f.deliver(gift("big", "r1", "solo", 1, 25))
	require.NoError(t, err)
	require.Equal(t, map[string]int{"solo/1": 1, "solo/2": 1}, f.levelUps())

	// 40 gifts of 1 point by each of 3 senders, each delivered twice, by
	// 8 goroutines at once: levels 1 and 2 each, once.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				for _, user := range []string{"a", "b", "c"} {
					if _, err := f.deliver(gift(fmt.Sprintf("%s-%d", user, (i+w*5)%40), "r1", user, 1, 1)); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got := f.levelUps()
	require.Equal(t, map[string]int{"solo/1": 1, "solo/2": 1, "a/1": 1, "a/2": 1, "b/1": 1, "b/2": 1, "c/1": 1, "c/2": 1}, got)
	for _, u := range []string{"a", "b", "c"} {
		act := f.activity(u)
		require.Equal(t, GiftTotals{40, 40, 40}, act.GiftsSent, u)
		require.Equal(t, 2, act.Level)
	}
}

// TestHandlerFailureRollsBack: a failing transaction (here: the outbox
// table is gone) applies nothing, records nothing, and the same event
// applies once when it is delivered again.
func TestHandlerFailureRollsBack(t *testing.T) {
	f := newFixture(t, 5)
	_, err := f.db.Exec("RENAME TABLE activity_outbox TO activity_outbox_away")
	require.NoError(t, err)
	_, err = f.deliver(gift("g", "r", "u", 1, 9))
	require.Error(t, err)
	_, err = f.db.Exec("RENAME TABLE activity_outbox_away TO activity_outbox")
	require.NoError(t, err)
	var n int
	require.NoError(t, f.db.QueryRow("SELECT COUNT(*) FROM activity_users").Scan(&n))
	require.Zero(t, n, "nothing of the failed try is left")
	res, err := f.deliver(gift("g", "r", "u", 1, 9))
	require.NoError(t, err)
	require.Equal(t, inbox.Processed, res)
	require.Equal(t, map[string]int{"u/1": 1}, f.levelUps())
}

// TestDecode: what activity-service applies, ignores, does not know, and
// refuses as malformed (acked and counted, never retried).
func TestDecode(t *testing.T) {
	hdr := func(id, typ string) nats.Header {
		h := nats.Header{}
		if id != "" {
			h.Set(jetstream.MsgIDHeader, id)
		}
		h.Set(natsjs.HeaderEventType, typ)
		return h
	}
	env := func(id, typ, room, data string) []byte {
		return []byte(fmt.Sprintf(`{"event_id":%q,"event_type":%q,"room_id":%q,"data":%s,"extra":1}`, id, typ, room, data))
	}
	ev, err := decode(hdr("e1", RoomGiftSent), env("e1", RoomGiftSent, "r1", `{"user_id":"u","gift_id":"rose","count":3,"points":15}`))
	require.NoError(t, err)
	require.Equal(t, gift("e1", "r1", "u", 3, 15), ev)
	ev, err = decode(hdr("e2", RoomCreated), env("e2", RoomCreated, "r1", `{"owner_id":"o"}`))
	require.NoError(t, err)
	require.Equal(t, roomEvent{ID: "e2", Type: RoomCreated, RoomID: "r1", UserID: "o"}, ev)

	_, err = decode(hdr("e3", RoomHeatChanged), env("e3", RoomHeatChanged, "r1", `{"heat":1}`))
	require.ErrorIs(t, err, errIgnoredType)
	_, err = decode(hdr("e4", "RoomRenamed"), env("e4", "RoomRenamed", "r1", `{}`))
	require.ErrorIs(t, err, errUnknownType)

	long := strings.Repeat("x", 65)
	for name, c := range map[string]struct {
		h    nats.Header
		body []byte
	}{
		"no message ID":      {hdr("", RoomGiftSent), env("e", RoomGiftSent, "r", `{}`)},
		"no type header":     {hdr("e", ""), env("e", RoomGiftSent, "r", `{"user_id":"u","count":1,"points":1}`)},
		"not JSON":           {hdr("e", RoomUserJoined), []byte("{\"event_id\":")},
		"IDs disagree":       {hdr("e", RoomUserJoined), env("other", RoomUserJoined, "r", `{"user_id":"u"}`)},
		"types disagree":     {hdr("e", RoomUserJoined), env("e", RoomUserLeft, "r", `{"user_id":"u"}`)},
		"no user":            {hdr("e", RoomUserJoined), env("e", RoomUserJoined, "r", `{}`)},
		"user too long":      {hdr("e", RoomUserJoined), env("e", RoomUserJoined, "r", `{"user_id":"`+long+`"}`)},
		"no room":            {hdr("e", RoomUserJoined), env("e", RoomUserJoined, "", `{"user_id":"u"}`)},
		"gift without count": {hdr("e", RoomGiftSent), env("e", RoomGiftSent, "r", `{"user_id":"u","points":1}`)},
		"negative points":    {hdr("e", RoomGiftSent), env("e", RoomGiftSent, "r", `{"user_id":"u","count":1,"points":-1}`)},
		"points overflow":    {hdr("e", RoomGiftSent), env("e", RoomGiftSent, "r", `{"user_id":"u","count":1,"points":99999999999999999999}`)},
		"data not an object": {hdr("e", RoomGiftSent), env("e", RoomGiftSent, "r", `[1]`)},
		"huge payload":       {hdr("e", RoomGiftSent), make([]byte, maxPayloadSize+1)},
	} {
		_, err := decode(c.h, c.body)
		require.ErrorIs(t, err, errMalformed, name)
	}
}
