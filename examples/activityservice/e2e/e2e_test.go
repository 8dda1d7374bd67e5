//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mysqldrv "github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/outboxrelay/outboxrelay/examples/activityservice/internal/activityservice"
	"github.com/outboxrelay/outboxrelay/examples/internal/natstest"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// The run's shape.
const (
	commands = 400
	users    = 24
)

// brokerConsumer is the consumer of room-service's outbox that relays
// to NATS.
const brokerConsumer = "broker"

// levels are activity-service's thresholds in this run: low enough that
// most users cross some.
var levels = []int64{50, 150, 400, 1000}

// TestEndToEnd runs room-service and activity-service as processes and
// checks that activity-service's totals are exact after SIGKILLs and a
// lost database connection, with every duplicate absorbed by the inbox.
func TestEndToEnd(t *testing.T) {
	ctx := context.Background()
	// Registered first, so that it runs after every other cleanup (the
	// processes, the proxy, the pools); testutil's own pool on the server
	// lives as long as the test binary.
	testutil.ServerDSN(t)
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		client.CloseIdleConnections()
		testutil.VerifyNoLeaks(t, ignore)
	})
	var seedBytes [8]byte
	_, _ = rand.Read(seedBytes[:])
	seed := binary.BigEndian.Uint64(seedBytes[:])
	run := hex.EncodeToString(seedBytes[:4])
	t.Logf("run %s, seed %d; MySQL: %s; NATS: %s", run, seed, testutil.Server(t), natstest.URL())

	js := natstest.JetStream(t)
	roomsStream, activityStream := "E2E_ROOMS_"+run, "E2E_ACTIVITY_"+run
	roomsPrefix, activityPrefix := "e2e_"+run+".rooms", "e2e_"+run+".activity"
	natstest.DeleteStreamsAtCleanup(t, js, roomsStream, activityStream)

	roomDB, activityDB := testutil.NewDatabase(t), testutil.NewDatabase(t)
	roomBin, activityBin := buildBinaries(t)
	secret := hex.EncodeToString(seedBytes[:]) + "-im-key"
	fakeIM := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: 1400000000, SecretKey: secret, AdminIdentifier: "administrator"})
	t.Cleanup(fakeIM.Close)

	dir := t.TempDir()
	roomConfig := writeConfig(t, dir, "room.yaml", fmt.Sprintf(`
http: {addr: "127.0.0.1:0", admin_addr: "127.0.0.1:0", drain_delay: "0s"}
tencent_im: {base_url: %s, sdk_app_id: 1400000000, admin_identifier: "administrator"}
outbox_worker: {poll_interval: "50ms"}
nats: {stream: %s, subject_prefix: %s, consumer: %s, startup_timeout: "30s"}
`, yamlQuote(fakeIM.URL()), yamlQuote(roomsStream), yamlQuote(roomsPrefix), yamlQuote(brokerConsumer)))
	room := startProc(t, "roomservice", roomBin, []string{"MYSQL_DSN=" + roomDB.DSN, "NATS_URL=" + natstest.URL(), "TENCENT_IM_SECRET_KEY=" + secret},
		"room-service serving", "-config", roomConfig)

	levelList, _ := json.Marshal(levels)
	activityConfig := writeConfig(t, dir, "activity.yaml", fmt.Sprintf(`
http: {addr: "127.0.0.1:0", admin_addr: "127.0.0.1:0", drain_delay: "0s"}
rooms: {stream: %s, subject_prefix: %s, ack_wait: "3s", fetch_batch: 20, fetch_wait: "200ms", retry_delay: "200ms", startup_timeout: "30s"}
levels: %s
outbox: {stream: %s, subject_prefix: %s, poll_interval: "100ms"}
`, yamlQuote(roomsStream), yamlQuote(roomsPrefix), levelList, yamlQuote(activityStream), yamlQuote(activityPrefix)))
	natsProxy := startProxy(t, natstest.URL())
	activityEnv := []string{"MYSQL_DSN=" + activityDB.DSN, "NATS_URL=" + natsProxy.URL()}
	startActivity := func() *proc {
		return startProc(t, "activityservice", activityBin, activityEnv, "activity-service serving", "-config", activityConfig)
	}
	activity := startActivity()
	runs := []*proc{activity}
	for _, probe := range []string{"/healthz", "/readyz", "/metrics"} {
		require.Equal(t, http.StatusOK, getStatus(t, activity.adminAddr, probe), probe)
	}

	// Send the commands. While activity-service consumes them, SIGKILL
	// it twice, each time with messages delivered to it and not
	// acknowledged, and kill its database connections once.
	m := newModel(seed, users)
	sent, accepted, events := 0, 0, 0
	send := func() {
		c := m.next(sent)
		status, body := post(t, room.addr, c.path, c.body)
		sent++
		if !c.valid {
			require.Equal(t, http.StatusConflict, status, "%s %v must be refused: %s", c.path, c.body, body)
			return
		}
		require.Equal(t, http.StatusOK, status, "%s %v: %s", c.path, c.body, body)
		var res struct {
			EventIDs []string `json:"event_ids"`
		}
		require.NoError(t, json.Unmarshal(body, &res))
		m.accepted(c)
		accepted++
		events += len(res.EventIDs)
	}
	cons := func() jetstream.Consumer {
		c, err := js.Consumer(ctx, roomsStream, activityservice.DefaultDurable)
		require.NoError(t, err)
		return c
	}
	restart := func(why string) {
		activity.kill()
		t.Logf("command %d: SIGKILLed activity-service (run %d) %s", sent, len(runs), why)
		natsProxy.cut()
		activity = startActivity()
		runs = append(runs, activity)
	}
	for stage := 0; sent < commands; {
		switch {
		case stage == 0 && sent >= commands/4:
			stage++
			// Its transactions wait on a lock: the messages it holds are
			// not applied, and come back after ack_wait.
			unlock := lockActivityTables(t, activityDB.DB)
			holdMessages(t, cons(), activityDB, send)
			restart("while it held unacknowledged messages it could not apply")
			unlock()
		case stage == 1 && sent >= commands/2:
			stage++
			// As above, then its acks are held back (the proxy to NATS
			// freezes) and its transactions may commit: messages applied
			// and not acknowledged, which come back as duplicates.
			unlock := lockActivityTables(t, activityDB.DB)
			holdMessages(t, cons(), activityDB, send)
			natsProxy.freeze()
			before := countRows(t, activityDB.DB, "inbox")
			unlock()
			eventually(t, time.Minute, "an event applied while its ack is held back", func() (bool, string) {
				n := countRows(t, activityDB.DB, "inbox")
				return n > before, fmt.Sprintf("%d processed", n)
			})
			restart("after it applied messages whose acks were held back")
		case stage == 2 && sent >= commands*3/4:
			stage++
			waitProcessing(t, activityDB.DB)
			n, err := activityDB.KillConnections(ctx)
			require.NoError(t, err)
			t.Logf("command %d: killed %d MySQL connections of activity-service", sent, n)
		}
		send()
	}

	// Every event reaches the stream, and activity-service catches up.
	roomsS, err := js.Stream(ctx, roomsStream)
	require.NoError(t, err)
	eventually(t, 2*time.Minute, "room-service relays every event to the stream", func() (bool, string) {
		info, err := roomsS.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.State.Msgs == uint64(events), fmt.Sprintf("%d of %d in the stream", info.State.Msgs, events)
	})
	waitRelayed(t, ctx, roomDB)
	shortenDuplicateWindow(t, ctx, js, roomsStream)
	redelivered := republish(t, ctx, js, roomsS, 10)
	var info *jetstream.ConsumerInfo
	eventually(t, 2*time.Minute, "activity-service consumes every event", func() (bool, string) {
		info, err = cons().Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return info.NumPending == 0 && info.NumAckPending == 0 && info.AckFloor.Stream == uint64(events+redelivered),
			fmt.Sprintf("pending %d, ack pending %d, ack floor %d of %d", info.NumPending, info.NumAckPending, info.AckFloor.Stream, events+redelivered)
	})

	// Every user's totals are exact.
	for u, want := range m.totals {
		got := getActivity(t, activity.addr, u)
		require.Equal(t, activityservice.Activity{
			UserID: u, Level: levelOf(want.PointsSent),
			GiftsSent:     activityservice.GiftTotals{Count: want.GiftsSent, Items: want.ItemsSent, Points: want.PointsSent},
			GiftsReceived: activityservice.GiftTotals{Count: want.GiftsReceived, Items: want.ItemsReceived, Points: want.PointsReceived},
			RoomsJoined:   int64(len(want.Rooms)), Joins: want.Joins, Leaves: want.Leaves, RoomsCreated: want.RoomsCreated,
		}, got, "user %s", u)
	}
	for _, u := range m.users {
		if m.totals[u] == nil {
			require.Equal(t, http.StatusNotFound, getStatus(t, activity.addr, "/users/"+u+"/activity"), "user %s did nothing", u)
		}
	}

	// Each threshold crossed gave one UserLevelUp, and each reached the
	// level-up stream.
	wantUps := m.levelUps(levels)
	require.Equal(t, wantUps, levelUps(t, activityDB.DB), "UserLevelUp events in activity_outbox, by user/level")
	activityS, err := js.Stream(ctx, activityStream)
	require.NoError(t, err)
	activityOutbox, err := mysql.New(activityDB.DB, mysql.Options{Table: "activity_outbox"})
	require.NoError(t, err)
	eventually(t, time.Minute, "every level-up published", func() (bool, string) {
		// Through the operator contract: the tables are the store's.
		st, err := activityOutbox.Stats(ctx)
		if err != nil {
			return false, err.Error()
		}
		pending := st.Pending + st.Dead
		info, err := activityS.Info(ctx)
		if err != nil {
			return false, err.Error()
		}
		return pending == 0 && info.State.Msgs == uint64(len(wantUps)), fmt.Sprintf("%d not published; %d of %d in the stream", pending, info.State.Msgs, len(wantUps))
	})

	// What the inbox absorbed: every activity-service process logged its
	// duplicates; the last one's /metrics counts its own.
	duplicates := 0
	for _, p := range runs {
		duplicates += p.countLogLines(t, "rooms: duplicate delivery absorbed by the inbox")
	}
	lastRun := metric(t, activity.adminAddr, `inbox_duplicates_total{consumer="`+activityservice.InboxConsumer+`"}`)
	require.Equal(t, float64(activity.countLogLines(t, "rooms: duplicate delivery absorbed by the inbox")), lastRun, "the last run's metric agrees with its log")
	require.GreaterOrEqual(t, duplicates, redelivered, "the events published again past the stream's duplicate window were absorbed")
	processed := countRows(t, activityDB.DB, "inbox")
	redeliveries := int(info.Delivered.Consumer) - events - redelivered
	require.Positive(t, redeliveries, "JetStream redelivered what the killed runs held")
	require.Greater(t, duplicates, redelivered, "a redelivery of an event a killed run had applied was absorbed")

	activity.stop(t)
	room.stop(t)
	deliveries := int(info.Delivered.Consumer)
	t.Logf("e2e: %d commands sent, %d accepted, %d events (%d copies republished past the stream's duplicate window); "+
		"%d deliveries, %d of them redeliveries; %d events processed through the inbox, %d duplicates absorbed (%d from kills and lost acks); "+
		"totals exact for %d users, %d level-ups",
		sent, accepted, events, redelivered, deliveries, redeliveries, processed, duplicates, duplicates-redelivered, len(m.totals), len(wantUps))
	fmt.Printf("e2e: %d commands, %d deliveries, %d duplicates absorbed, totals exact for %d users, %d level-ups\n",
		sent, deliveries, duplicates, len(m.totals), len(wantUps))
}

func levelOf(points int64) int {
	n := 0
	for n < len(levels) && levels[n] <= points {
		n++
	}
	return n
}

// waitProcessing waits until activity-service has processed an event
// since the call.
func waitProcessing(t *testing.T, db *sql.DB) {
	t.Helper()
	before := countRows(t, db, "inbox")
	eventually(t, time.Minute, "activity-service processes events", func() (bool, string) {
		n := countRows(t, db, "inbox")
		return n > before, fmt.Sprintf("%d processed", n)
	})
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM `"+table+"`").Scan(&n))
	return n
}

// lockActivityTables locks every row of activity_users, and the gaps
// between them, in a transaction of the test's: every event's
// transaction waits. It returns the function that releases the lock.
//
// The lock can deadlock with activity-service's transactions, which lock
// the same rows and gaps in another order; the server may then pick the
// test's transaction as the victim. It is taken again, a bounded number
// of times.
func lockActivityTables(t *testing.T, db *sql.DB) func() {
	t.Helper()
	for attempt := 1; ; attempt++ {
		tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		require.NoError(t, err)
		rows, err := tx.Query("SELECT user_id FROM activity_users FOR UPDATE")
		if err == nil {
			err = rows.Close()
		}
		if err == nil {
			return func() { require.NoError(t, tx.Rollback()) }
		}
		_ = tx.Rollback()
		var me *mysqldrv.MySQLError
		require.Truef(t, errors.As(err, &me) && me.Number == 1213 && attempt < 20, "locking activity_users (attempt %d): %v", attempt, err)
		t.Logf("locking activity_users: deadlock with activity-service, attempt %d; again", attempt)
	}
}

// holdMessages sends commands until activity-service's transaction waits
// for the test's lock while it holds at least two messages it has not
// acknowledged.
func holdMessages(t *testing.T, cons jetstream.Consumer, db *testutil.Database, send func()) {
	t.Helper()
	eventually(t, time.Minute, "activity-service waits on the lock, holding unacknowledged messages", func() (bool, string) {
		var waits int
		// While the test holds the lock, a statement on activity_users
		// waits for it. (INNODB_TRX does not list every such session.)
		if err := db.DB.QueryRow("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND COMMAND IN ('Query', 'Execute')"+
			" AND INFO LIKE '%activity_users%' AND ID <> CONNECTION_ID()", db.Name).Scan(&waits); err != nil {
			return false, err.Error()
		}
		info, err := cons.Info(context.Background())
		if err != nil {
			return false, err.Error()
		}
		if waits > 0 && info.NumAckPending >= 2 {
			return true, ""
		}
		if info.NumPending == 0 {
			send() // more for it to fetch
		}
		return false, fmt.Sprintf("%d transactions waiting, %d messages delivered and not acknowledged, %d not delivered; sessions: %s",
			waits, info.NumAckPending, info.NumPending, sessions(db))
	})
}

// sessions lists the database's sessions and transactions, for a failure
// message.
func sessions(db *testutil.Database) string {
	rows, err := db.DB.Query("SELECT p.ID, p.COMMAND, COALESCE(p.STATE, ''), LEFT(COALESCE(p.INFO, ''), 80), COALESCE(t.trx_state, '')"+
		" FROM information_schema.PROCESSLIST p LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID WHERE p.DB = ?", db.Name)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id int64
		var cmd, state, info, trx string
		if err := rows.Scan(&id, &cmd, &state, &info, &trx); err != nil {
			return err.Error()
		}
		out = append(out, fmt.Sprintf("[%d %s %q %q trx=%s]", id, cmd, state, info, trx))
	}
	return strings.Join(out, " ")
}

// waitRelayed waits until room-service's broker consumer has nothing
// pending: it will not publish an event again.
func waitRelayed(t *testing.T, ctx context.Context, roomDB *testutil.Database) {
	t.Helper()
	s, err := mysql.New(roomDB.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(t, err)
	broker, err := s.Consumer(brokerConsumer)
	require.NoError(t, err)
	eventually(t, 2*time.Minute, "room-service's broker consumer has nothing pending", func() (bool, string) {
		st, err := broker.Stats(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Pending == 0, fmt.Sprintf("%d pending", st.Pending)
	})
}

// shortenDuplicateWindow sets the stream's duplicate window to a second.
// room-service's stream keeps the default window (minutes) while it
// relays: an event its outbox sends again (a settle lost on a loaded
// machine, its lease run out) is discarded by the stream, as in
// production, and the stream holds each event once. With a window of a
// second from the start, such a late copy was stored too and the count
// below never matched. Once room-service is done, the test's own copies
// need a short window.
func shortenDuplicateWindow(t *testing.T, ctx context.Context, js jetstream.JetStream, name string) {
	t.Helper()
	s, err := js.Stream(ctx, name)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	cfg := info.Config
	cfg.Duplicates = time.Second
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
}

// republish publishes n events of the stream again, with their event
// IDs, once the stream's duplicate window has passed for them: a
// redelivery the stream cannot discard (an outbox worker that retried
// late), which only the inbox can absorb. They are events
// activity-service applies (not those it ignores). It returns n.
func republish(t *testing.T, ctx context.Context, js jetstream.JetStream, s jetstream.Stream, n int) int {
	t.Helper()
	applied := map[string]bool{activityservice.RoomCreated: true, activityservice.RoomUserJoined: true,
		activityservice.RoomUserLeft: true, activityservice.RoomGiftSent: true}
	for seq, copies := uint64(1), 0; copies < n; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		if !applied[raw.Header.Get(natsjs.HeaderEventType)] {
			continue // acknowledged without the inbox
		}
		copies++
		msg := &nats.Msg{Subject: raw.Subject, Header: raw.Header, Data: raw.Data}
		eventually(t, time.Minute, "a copy past the duplicate window is stored", func() (bool, string) {
			ack, err := js.PublishMsg(ctx, msg)
			if err != nil {
				return false, err.Error()
			}
			return !ack.Duplicate, "discarded as a duplicate: still in the window"
		})
	}
	return n
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (%s)", what, within, state)
		}
		<-tick.C
	}
}

func writeConfig(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(strings.TrimSpace(content)+"\n"), 0o600))
	return path
}

var client = &http.Client{Timeout: 30 * time.Second}

func post(t *testing.T, addr, path string, body map[string]any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := client.Post("http://"+addr+path, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

func getStatus(t *testing.T, addr, path string) int {
	t.Helper()
	resp, err := client.Get("http://" + addr + path)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func getActivity(t *testing.T, addr, user string) activityservice.Activity {
	t.Helper()
	resp, err := client.Get("http://" + addr + "/users/" + user + "/activity")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "user %s", user)
	var act activityservice.Activity
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&act))
	return act
}

// levelUps counts the UserLevelUp events in activity-service's outbox by
// user/level.
func levelUps(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.Query("SELECT payload FROM activity_outbox WHERE event_type = ?", activityservice.UserLevelUp)
	require.NoError(t, err)
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var payload []byte
		require.NoError(t, rows.Scan(&payload))
		var up activityservice.LevelUp
		require.NoError(t, json.Unmarshal(payload, &up))
		n[fmt.Sprintf("%s/%d", up.UserID, up.Level)]++
	}
	require.NoError(t, rows.Err())
	return n
}

// metric reads one sample from a /metrics page.
func metric(t *testing.T, addr, series string) float64 {
	t.Helper()
	resp, err := client.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			require.NoError(t, err)
			return f
		}
	}
	return 0
}
