package natsjs_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/sink/natsjs/internal/natstest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// stream creates a stream of its own for the test on the shared NATS
// server, capturing prefix.>, deleted when the test ends.
func stream(t *testing.T, js jetstream.JetStream, mutate func(*jetstream.StreamConfig)) (jetstream.Stream, string) {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	prefix := "test" + suffix
	cfg := natsjs.StreamConfig("TEST_"+suffix, prefix, 2*time.Minute)
	if mutate != nil {
		mutate(&cfg)
	}
	ctx := context.Background()
	s, err := js.CreateStream(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Name) })
	return s, prefix
}

func newSink(t *testing.T, cfg natsjs.Config) *natsjs.Sink {
	t.Helper()
	s, err := natsjs.New(cfg)
	require.NoError(t, err)
	return s
}

func message(id, key string) outbox.Message {
	return outbox.Message{ID: id, Key: key, Type: "RoomGiftSent", Payload: []byte(`{"id":"` + id + `"}`),
		Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
}

func TestMessagesLandInOrderPerKey(t *testing.T) {
	js, err := jetstream.New(natstest.NATS(t))
	require.NoError(t, err)
	str, prefix := stream(t, js, nil)
	sink := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix})
	ctx := context.Background()

	var sent []outbox.Message
	for i := range 30 {
		m := message(fmt.Sprintf("e-%02d", i), fmt.Sprintf("room-%d", i%3))
		require.NoError(t, sink.Publish(ctx, m))
		sent = append(sent, m)
	}
	info, err := str.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(len(sent)), info.State.Msgs)

	got := map[string][]string{}
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		raw, err := str.GetMsg(ctx, seq)
		require.NoError(t, err)
		id := raw.Header.Get(jetstream.MsgIDHeader)
		key := raw.Header.Get(natsjs.HeaderEventKey)
		require.Equal(t, prefix+".RoomGiftSent."+key, raw.Subject)
		require.Equal(t, `{"id":"`+id+`"}`, string(raw.Data))
		require.Equal(t, "RoomGiftSent", raw.Header.Get(natsjs.HeaderEventType))
		require.Equal(t, sent[0].Headers["traceparent"], raw.Header.Get("traceparent"), "trace context travels on")
		got[key] = append(got[key], id)
	}
	for k := range 3 {
		key := fmt.Sprintf("room-%d", k)
		var want []string
		for _, m := range sent {
			if m.Key == key {
				want = append(want, m.ID)
			}
		}
		require.Equal(t, want, got[key], "stream order of %s", key)
	}
}

func TestRedeliveryIsStoredOnce(t *testing.T) {
	js, err := jetstream.New(natstest.NATS(t))
	require.NoError(t, err)
	str, prefix := stream(t, js, nil)
	var logs bytes.Buffer
	sink := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := context.Background()
	m := message("e-1", "room-1")
	for range 3 {
		require.NoError(t, sink.Publish(ctx, m), "a duplicate is delivered, not an error")
	}
	info, err := str.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
	require.Contains(t, logs.String(), "discarded as a duplicate")
}

// TestWorkerThroughJetStream: a worker whose settles are lost after the
// stream acknowledged (as when a process dies there) publishes again,
// and the stream still holds every event once.
func TestWorkerThroughJetStream(t *testing.T) {
	js, err := jetstream.New(natstest.NATS(t))
	require.NoError(t, err)
	str, prefix := stream(t, js, nil)
	sink := newSink(t, natsjs.Config{JetStream: js, Prefix: prefix})
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	store, err := mysql.New(d.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	const n = 200
	var ms []outbox.Message
	for i := range n {
		ms = append(ms, message(fmt.Sprintf("w-%03d", i), fmt.Sprintf("room-%d", i%7)))
	}
	require.NoError(t, store.Enqueue(ctx, d.DB, nil, ms...))
	// Every first attempt reaches the stream but is reported failed.
	var (
		mu        sync.Mutex
		tried     = map[string]bool{}
		published int
	)
	lossy := outbox.SinkFunc(func(ctx context.Context, m outbox.Message) error {
		if err := sink.Publish(ctx, m); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		published++
		if !tried[m.ID] {
			tried[m.ID] = true
			return errors.New("process died before recording the result")
		}
		return nil
	})
	w, err := outbox.NewWorker(store, lossy, outbox.WorkerOptions{
		Ordering: true, Concurrency: 4, PollInterval: 10 * time.Millisecond,
		Retry: outbox.FixedInterval{Interval: 10 * time.Millisecond}, Logger: outboxtest.Logger(t),
	})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := store.Stats(ctx)
		require.NoError(t, err)
		if st.Pending == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "%d still pending after a minute", st.Pending)
		time.Sleep(10 * time.Millisecond)
	}
	info, err := str.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(n), info.State.Msgs, "each event once")
	stop()
	<-done
	require.GreaterOrEqual(t, published, 2*n, "though each was published at least twice")
}

func TestErrorsAreClassified(t *testing.T) {
	nc := natstest.NATS(t)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	_, prefix := stream(t, js, func(c *jetstream.StreamConfig) { c.MaxMsgSize = 1024 })
	other, _ := stream(t, js, nil)

	cases := []struct {
		name      string
		cfg       natsjs.Config
		msg       outbox.Message
		ctx       func() (context.Context, context.CancelFunc)
		permanent bool
		// unavailable: the infrastructure's fault (issue 28, defect 13:
		// a missing stream dead-lettered every event)
		unavailable bool
		want        string
	}{
		{name: "no stream captures the subject", cfg: natsjs.Config{Prefix: "nostream" + prefix}, unavailable: true, want: "no stream captures the subject"},
		{name: "another stream than expected", cfg: natsjs.Config{Prefix: prefix, ExpectStream: other.CachedInfo().Config.Name}, unavailable: true, want: "not the expected stream"},
		{name: "too large for the stream", cfg: natsjs.Config{Prefix: prefix}, msg: outbox.Message{ID: "big", Type: "T", Payload: make([]byte, 4096)}, permanent: true, want: "maximum message size"},
		{name: "too large for the server", cfg: natsjs.Config{Prefix: prefix}, msg: outbox.Message{ID: "huge", Type: "T", Payload: make([]byte, 2<<20)}, permanent: true, want: "maximum payload"},
		{name: "invalid subject from the mapping", cfg: natsjs.Config{Subject: func(outbox.Message) (string, error) { return "a..b", nil }}, permanent: true, want: "not a valid publish subject"},
		{name: "mapping fails", cfg: natsjs.Config{Subject: func(outbox.Message) (string, error) { return "", errors.New("unroutable") }}, permanent: true, want: "unroutable"},
		{name: "credentials in a cause are redacted", cfg: natsjs.Config{Subject: func(outbox.Message) (string, error) {
			return "", errors.New("no route via nats://router:hunter2@10.0.0.1:4222")
		}}, permanent: true, want: "nats://[REDACTED]@10.0.0.1:4222"},
		{name: "out of time", cfg: natsjs.Config{Prefix: prefix}, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(ctx, time.Now().Add(-time.Second))
		}, want: "context deadline exceeded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.JetStream = js
			sink := newSink(t, tc.cfg)
			if tc.msg.ID == "" {
				tc.msg = message("e-1", "room-1")
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if tc.ctx != nil {
				pctx, cancel = tc.ctx()
			}
			defer cancel()
			err := sink.Publish(pctx, tc.msg)
			require.Error(t, err)
			require.Equal(t, tc.permanent, outbox.IsPermanent(err), "%v", err)
			require.Equal(t, tc.unavailable, outbox.IsUnavailable(err), "%v", err)
			require.ErrorContains(t, err, tc.want)
			require.ErrorContains(t, err, tc.msg.ID, "names the event")
		})
	}

	t.Run("closed connection", func(t *testing.T) {
		nc2 := natstest.NATS(t)
		js2, err := jetstream.New(nc2)
		require.NoError(t, err)
		sink := newSink(t, natsjs.Config{JetStream: js2, Prefix: prefix})
		nc2.Close()
		err = sink.Publish(ctx, message("e-1", "room-1"))
		require.Error(t, err)
		require.False(t, outbox.IsPermanent(err), "%v", err)
		require.ErrorIs(t, err, nats.ErrConnectionClosed)
	})
}

// TestServerSideFailures runs servers of the test's own: one with
// authorization rules, one without JetStream, one that goes down.
// Credentials never reach an error or a log line.
func TestServerSideFailures(t *testing.T) {
	const password = "s3cret-pa55word"
	srv := natstest.StartNATSServer(t, `
jetstream {}
authorization {
  users = [
    {user: admin, password: "`+password+`"}
    {user: narrow, password: "`+password+`", permissions: {publish: {allow: ["$JS.API.>", "allowed.>"]}, subscribe: {allow: ["_INBOX.>"]}}}
  ]
}`)
	ctx := context.Background()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	connect := func(user string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
		nc, err := nats.Connect("nats://"+user+":"+password+"@"+srv.Addr, append(opts, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		return nc, js
	}
	_, admin := connect("admin")
	for _, name := range []string{"ALLOWED", "DENIED"} {
		_, err := admin.CreateStream(ctx, natsjs.StreamConfig(name, strings.ToLower(name), time.Minute))
		require.NoError(t, err)
	}

	_, narrow := connect("narrow")
	ok := newSink(t, natsjs.Config{JetStream: narrow, Prefix: "allowed", Logger: logger})
	require.NoError(t, ok.Publish(ctx, message("e-1", "room-1")), "permitted subjects work")
	denied := newSink(t, natsjs.Config{JetStream: narrow, Prefix: "denied", Logger: logger})
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := denied.Publish(pctx, message("e-2", "room-1"))
	cancel()
	require.Error(t, err)
	require.True(t, outbox.IsUnavailable(err), "no permission: the account's rights, not the message: %v", err)
	require.False(t, outbox.IsPermanent(err), "%v", err)
	require.ErrorContains(t, err, "no permission to publish")
	require.NotContains(t, err.Error(), password)

	t.Run("no JetStream", func(t *testing.T) {
		plain := natstest.StartNATSServer(t, "")
		nc, err := nats.Connect("nats://" + plain.Addr)
		require.NoError(t, err)
		defer nc.Close()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		err = newSink(t, natsjs.Config{JetStream: js, Logger: logger}).Publish(ctx, message("e-3", "room-1"))
		require.Error(t, err)
		require.False(t, outbox.IsPermanent(err), "JetStream may come back: %v", err)
		require.True(t, outbox.IsUnavailable(err), "an operator must enable JetStream: %v", err)
		require.ErrorContains(t, err, "JetStream is not enabled or not answering")
	})

	t.Run("server down", func(t *testing.T) {
		gone := natstest.StartNATSServer(t, "jetstream {}")
		url := "nats://someone:" + password + "@" + gone.Addr
		nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		require.NoError(t, err)
		defer nc.Close()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		gone.Stop()
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		err = newSink(t, natsjs.Config{JetStream: js, Logger: logger}).Publish(pctx, message("e-4", "room-1"))
		require.Error(t, err)
		require.False(t, outbox.IsPermanent(err), "the server may come back: %v", err)
		require.NotContains(t, err.Error(), password)
	})
	require.NotContains(t, logs.String(), password)
}

func TestConfigIsValidated(t *testing.T) {
	_, err := natsjs.New(natsjs.Config{})
	require.ErrorContains(t, err, "JetStream: required")
	js, err := jetstream.New(natstest.NATS(t))
	require.NoError(t, err)
	for _, bad := range []string{"a..b", "a.*", "a.>", " a", "a."} {
		_, err := natsjs.New(natsjs.Config{JetStream: js, Prefix: bad})
		require.ErrorContains(t, err, "Prefix", bad)
	}
}

func TestTokenIsInjective(t *testing.T) {
	seen := map[string]string{}
	for _, s := range []string{"", "%", "room-1", "room.1", "room_1", "room 1", "ROOM", "r>", "r*", "日本", "a%2Eb", "_"} {
		tok := natsjs.Token(s)
		require.NotContains(t, tok, ".")
		require.NotContains(t, tok, " ")
		prev, dup := seen[tok]
		require.False(t, dup, "%q and %q share %q", prev, s, tok)
		seen[tok] = s
	}
}

func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "room-1", "a.b", "%", "%25", "日本"} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, tb := natsjs.Token(a), natsjs.Token(b)
		if a != b && ta == tb {
			t.Fatalf("%q and %q map to the same token %q", a, b, ta)
		}
		if ta == "" || strings.ContainsAny(ta, ". \t\r\n*>") {
			t.Fatalf("%q maps to %q, not a subject token", a, ta)
		}
	})
}
