package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
)

// runDemo finds a MySQL (see demoMySQL), makes a scratch database on it,
// runs the demo there and drops it.
func runDemo(ctx context.Context, out io.Writer, dsn string) error {
	db, err := demoMySQL(ctx, dsn, out)
	if err != nil {
		return err
	}
	defer db.cleanup()
	_, err = runDemoOn(ctx, out, db.dsn, db.maxOpenConns)
	return err
}

// demoReport is what the demo saw, for its test.
type demoReport struct {
	JoinEventID string
	GiftEventID string
	// IMDeliveries counts, per event ID, the messages Tencent IM (the
	// fake) kept.
	IMDeliveries map[string]int
	Lifecycle    []string
}

// demo is one run: the app, the IM fake, an HTTP client, and where to
// narrate.
type demo struct {
	ctx    context.Context
	out    io.Writer
	app    *roomservice.App
	im     *tencentimtest.Server
	client *http.Client
	step   int
}

// runDemoOn runs the seed's Done Definition against the database dsn
// (through at most maxOpenConns connections; 0: no cap), printing each
// step, and checks every step; an unexpected outcome is an error.
func runDemoOn(ctx context.Context, out io.Writer, dsn string, maxOpenConns int) (demoReport, error) {
	im, imCfg := startFakeIM()
	defer im.Close() // after the app has shut down
	var cfg roomservice.Config
	cfg.NodeID, cfg.HTTP.Addr, cfg.MySQL.DSN, cfg.MySQL.MaxOpenConns = "demo-node", "127.0.0.1:0", dsn, maxOpenConns
	cfg.TencentIM = imCfg
	// No drain delay: nothing balances load onto the demo. Any free port
	// for the admin listener, so that the demo runs beside a room-service.
	noDrain := time.Duration(0)
	cfg.HTTP.AdminAddr, cfg.HTTP.DrainDelay = "localhost:0", &noDrain
	cfg.OutboxWorker.PollInterval, cfg.OutboxWorker.PublishTimeout = 200*time.Millisecond, 2*time.Second
	// The demo narrates the after-commit publish failing at the fake; on
	// a loaded machine the default 500ms could end it before the fake
	// answers, and the worker would then tell another story.
	cfg.OutboxWorker.AfterCommitTimeout = 2 * time.Second
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	app, err := roomservice.NewApp(ctx, cfg.WithDefaults(), logger)
	if err != nil {
		return demoReport{}, err
	}
	if err := app.Start(); err != nil {
		return demoReport{}, err
	}
	d := &demo{ctx: ctx, out: out, app: app, im: im, client: &http.Client{Timeout: 10 * time.Second}}
	report, err := d.run()
	shutdownErr := d.shutdown(&report)
	return report, errors.Join(err, shutdownErr)
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, format+"\n", args...)
}

func (d *demo) stepf(format string, args ...any) {
	d.step++
	d.say("%d. "+format, append([]any{d.step}, args...)...)
}

func (d *demo) run() (demoReport, error) {
	report := demoReport{IMDeliveries: map[string]int{}}
	d.say("Tencent IM: a local fake of the REST API at %s, told to fail the next call (ErrorCode 10002) and leave the one after it unanswered", d.im.URL())
	// The failed sync publish wakes the worker at once; its first try
	// hangs until its PublishTimeout, so that the record is seen as the
	// sync path left it, whatever the scheduling.
	d.im.FailNext(1, 10002, "internal error, please retry")
	d.im.HangNext(1)
	for _, step := range []func(*demoReport) error{d.failedSyncPublish, d.workerRepublishes, d.giftAndReplay} {
		if err := step(&report); err != nil {
			return report, err
		}
	}
	for _, m := range d.im.AllMessages() {
		for _, e := range m.Elems {
			var ext struct {
				EventID string `json:"event_id"`
			}
			if json.Unmarshal([]byte(e.Ext), &ext) == nil {
				report.IMDeliveries[ext.EventID]++
			}
		}
	}
	d.stepf("Tencent IM group room-1 holds %d messages: the join once, the gift once", len(d.im.Messages("room-1")))
	return report, nil
}

// failedSyncPublish: a room is created, bob joins, and the join's
// publish right after commit fails, while the command still succeeds and
// the event stays pending with retry_count 0.
func (d *demo) failedSyncPublish(report *demoReport) error {
	created, err := d.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "cmd-create-1"})
	if err != nil {
		return err
	}
	d.stepf("POST /v1/rooms room-1 → 200; RoomCreated %s needs no IM call: %s", created.EventIDs[0], d.status(created.EventIDs[0]))

	joined, err := d.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "cmd-join-1"})
	if err != nil {
		return err
	}
	report.JoinEventID = joined.EventIDs[0]
	d.stepf("command committed: bob joined room-1, emitting RoomUserJoined %s and RoomHeatChanged", report.JoinEventID)
	reqs := d.im.Requests()
	if len(reqs) == 0 || reqs[len(reqs)-1].ErrorCode != 10002 {
		return errors.New("demo: the after-commit publish was expected to fail")
	}
	d.stepf("sync publish to Tencent IM failed: ErrorCode %d", reqs[len(reqs)-1].ErrorCode)
	d.stepf("HTTP response still succeeded: 200, room-1 member_count %d, heat %d", joined.Room.MemberCount, joined.Room.Heat)
	rec, err := d.app.Store().Get(d.ctx, report.JoinEventID)
	if err != nil || rec.Status != outbox.StatusPending || rec.Attempts != 0 {
		return fmt.Errorf("demo: want the join event pending with retry_count 0, got %+v (%v)", rec, err)
	}
	d.stepf("outbox: %s status=%s retry_count=%d (a failed sync publish is not a retry)", rec.ID, rec.Status, rec.Attempts)
	return nil
}

// workerRepublishes: the worker delivers the same event_id and marks it
// published.
func (d *demo) workerRepublishes(report *demoReport) error {
	rec, err := d.waitPublished(report.JoinEventID)
	if err != nil {
		return err
	}
	d.stepf("worker republished the same event_id %s to group room-1 (its first try timed out: retry_count=%d)", rec.ID, rec.Attempts)
	d.stepf("outbox: %s status=%s", rec.ID, rec.Status)
	return nil
}

// giftAndReplay: with IM healthy, a gift is published right after commit,
// and the same command_id again returns the first result.
func (d *demo) giftAndReplay(report *demoReport) error {
	cmd := map[string]any{"user_id": "bob", "gift_id": "rocket", "count": 2, "command_id": "cmd-gift-1"}
	gift, err := d.command("/v1/rooms/room-1/gifts", cmd)
	if err != nil {
		return err
	}
	report.GiftEventID = gift.EventIDs[0]
	d.stepf("POST gifts (IM healthy again): RoomGiftSent %s %s right after commit; heat %d, ranking %v",
		report.GiftEventID, d.status(report.GiftEventID), gift.Room.Heat, gift.Room.GiftRanking)
	again, err := d.command("/v1/rooms/room-1/gifts", cmd)
	if err != nil {
		return err
	}
	if !slices.Equal(again.EventIDs, gift.EventIDs) || again.Room.Heat != gift.Room.Heat {
		return errors.New("demo: a repeated command_id must return the first result")
	}
	d.stepf("the same command_id again → the first result, no new events")
	return nil
}

// shutdown stops the app and checks the order: readiness fails, HTTP
// drains, the worker stops, MySQL closes last.
func (d *demo) shutdown(report *demoReport) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := d.app.Shutdown(ctx)
	report.Lifecycle = d.app.Lifecycle()
	d.stepf("shutdown: %s", strings.Join(report.Lifecycle, " → "))
	httpAt := slices.Index(report.Lifecycle, "http server stopped")
	workerAt := slices.Index(report.Lifecycle, "outbox worker stopped")
	mysqlAt := slices.Index(report.Lifecycle, "mysql closed")
	if httpAt < 0 || workerAt < httpAt || mysqlAt < workerAt {
		return errors.New("demo: HTTP must drain first, then the worker stop, then MySQL close")
	}
	d.say("done: the room command committed, its sync publish failed, the worker delivered the same event_id, and shutdown drained HTTP, then stopped the worker, then closed MySQL")
	return err
}

// command posts body and decodes a 200 result.
func (d *demo) command(path string, body map[string]any) (roomservice.Result, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(d.ctx, http.MethodPost, "http://"+d.app.Addr()+path, bytes.NewReader(b))
	if err != nil {
		return roomservice.Result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return roomservice.Result{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return roomservice.Result{}, fmt.Errorf("demo: POST %s: %s: %s", path, resp.Status, msg)
	}
	var res roomservice.Result
	err = json.NewDecoder(resp.Body).Decode(&res)
	if err == nil && len(res.EventIDs) == 0 {
		err = fmt.Errorf("demo: POST %s emitted no events", path)
	}
	return res, err
}

func (d *demo) status(id string) string {
	rec, err := d.app.Store().Get(d.ctx, id)
	if err != nil {
		return err.Error()
	}
	return string(rec.Status)
}

// waitPublished polls the outbox until the event is published.
func (d *demo) waitPublished(id string) (outbox.Record, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		rec, err := d.app.Store().Get(d.ctx, id)
		if err == nil && rec.Status == outbox.StatusPublished {
			return rec, nil
		}
		if time.Now().After(deadline) {
			return rec, fmt.Errorf("demo: %s not published within 30s (last: %+v, %v)", id, rec, err)
		}
		select {
		case <-d.ctx.Done():
			return rec, d.ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
