package tencentim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
)

const (
	appID  = 1400000001
	secret = "S3CRET-key-do-not-leak-7f3a9c1e5b"
	admin  = "administrator"
)

func newFake(t *testing.T) *tencentimtest.Server {
	f := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin})
	t.Cleanup(f.Close)
	return f
}

// publishHung publishes m through s while f leaves the call unanswered,
// and makes the call's deadline pass only once f holds it. With a
// deadline of a few milliseconds, a loaded machine could spend it before
// the request was sent: the call did not test a hung server, and the hang
// stayed queued for the next call, which never returned.
func publishHung(t *testing.T, f *tencentimtest.Server, s *tencentim.Sink, m outbox.Message) error {
	t.Helper()
	// Earlier calls' handlers may still be finishing after their replies.
	outboxtest.Eventually(t, "no call in flight", func() bool { return f.InFlight() == 0 })
	f.HangNext(1)
	ctx := newExpiring()
	defer ctx.expire()
	errc := make(chan error, 1)
	go func() { errc <- s.Publish(ctx, m) }()
	outboxtest.Eventually(t, "the fake holds the call", func() bool { return f.InFlight() == 1 })
	ctx.expire()
	select {
	case err := <-errc:
		return err
	case <-time.After(outboxtest.WaitTimeout):
		t.Fatalf("Publish did not return within %v of its deadline", outboxtest.WaitTimeout)
		return nil
	}
}

// expiring is a context whose deadline passes when expire is called, as
// a context.WithDeadline's would at a time the test chooses: Err returns
// context.DeadlineExceeded from then on.
type expiring struct {
	context.Context
	done chan struct{}
	once sync.Once
}

func newExpiring() *expiring {
	return &expiring{Context: context.Background(), done: make(chan struct{})}
}

func (e *expiring) Done() <-chan struct{} { return e.done }

func (e *expiring) Err() error {
	select {
	case <-e.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (e *expiring) expire() { e.once.Do(func() { close(e.done) }) }

func newSink(t *testing.T, f *tencentimtest.Server, mod func(*tencentim.Config)) *tencentim.Sink {
	t.Helper()
	cfg := tencentim.Config{
		BaseURL: f.URL(), SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin,
		Logger: outboxtest.Logger(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := tencentim.New(cfg)
	require.NoError(t, err)
	return s
}

func roomMsg(id, room, typ string) outbox.Message {
	return outbox.Message{ID: id, Key: room, Type: typ, Payload: []byte(`{"event_id":"` + id + `","room_id":"` + room + `"}`)}
}

func TestPublishSendsCustomElemToTheKeyGroup(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	m := roomMsg("evt-1", "room-1", "RoomUserJoined")
	require.NoError(t, s.Publish(context.Background(), m))

	got := f.Messages("room-1")
	require.Len(t, got, 1)
	require.Equal(t, tencentimtest.APISendGroupMsg, got[0].API)
	require.Equal(t, tencentim.RandomFor("evt-1"), got[0].Random, "Random is derived from the event ID")
	require.Empty(t, got[0].Priority)
	require.Len(t, got[0].Elems, 1)
	e := got[0].Elems[0]
	require.Equal(t, "TIMCustomElem", e.Type)
	require.Equal(t, string(m.Payload), e.Data)
	var ext map[string]string
	require.NoError(t, json.Unmarshal([]byte(e.Ext), &ext))
	require.Equal(t, map[string]string{"event_id": "evt-1", "event_type": "RoomUserJoined"}, ext)

	reqs := f.Requests()
	require.Len(t, reqs, 1)
	q := reqs[0].Query
	require.Equal(t, strconv.Itoa(appID), q["sdkappid"])
	require.Equal(t, admin, q["identifier"])
	require.Equal(t, "json", q["contenttype"])
	_, err := strconv.ParseUint(q["random"], 10, 32)
	require.NoError(t, err)
	require.Zero(t, reqs[0].ErrorCode, "the fake verified the UserSig")
}

func TestSkipTypesMakeNoCall(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, func(c *tencentim.Config) {
		c.SkipTypes = []string{"RoomCreated", "RoomHeatChanged", "RoomRankChanged"}
	})
	for _, typ := range []string{"RoomCreated", "RoomHeatChanged", "RoomRankChanged"} {
		require.NoError(t, s.Publish(context.Background(), roomMsg("e-"+typ, "room-1", typ)))
	}
	require.Empty(t, f.Requests(), "no-IM types make no call")
	require.NoError(t, s.Publish(context.Background(), roomMsg("e-join", "room-1", "RoomUserJoined")))
	require.Len(t, f.Requests(), 1)
}

func TestRoutingPriorityAndSystemNotification(t *testing.T) {
	f := newFake(t)
	routed := newSink(t, f, func(c *tencentim.Config) {
		c.Priority = tencentim.PriorityHigh
		c.GroupID = func(m outbox.Message) (string, error) { return "@TGS#" + m.Key, nil }
	})
	require.NoError(t, routed.Publish(context.Background(), roomMsg("evt-r", "room-9", "RoomGiftSent")))
	got := f.Messages("@TGS#room-9")
	require.Len(t, got, 1)
	require.Equal(t, "High", got[0].Priority)

	notify := newSink(t, f, func(c *tencentim.Config) { c.Mode = tencentim.ModeSystemNotification })
	m := roomMsg("evt-n", "room-3", "RoomUserLeft")
	require.NoError(t, notify.Publish(context.Background(), m))
	got = f.Messages("room-3")
	require.Len(t, got, 1)
	require.Equal(t, tencentimtest.APISendGroupSystemNotification, got[0].API)
	require.Equal(t, string(m.Payload), got[0].Content)

	bad := newSink(t, f, func(c *tencentim.Config) {
		c.GroupID = func(outbox.Message) (string, error) { return "", errors.New("no such room mapping") }
	})
	err := bad.Publish(context.Background(), m)
	require.True(t, outbox.IsPermanent(err))
	require.ErrorContains(t, err, "no such room mapping")
}

func TestRepeatWithinFiveMinutesIsDiscardedUpstream(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	m := roomMsg("evt-dup", "room-1", "RoomUserJoined")
	require.NoError(t, s.Publish(context.Background(), m))
	require.NoError(t, s.Publish(context.Background(), m), "a redelivery (at-least-once) succeeds")
	require.Len(t, f.Messages("room-1"), 1, "but the group gets it once")
	require.Equal(t, 1, f.Duplicates())
}

func TestExpiredSignatureIsRenewedAndRetriedOnce(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	f.FailNext(1, 70001, "usersig expired")
	require.NoError(t, s.Publish(context.Background(), roomMsg("evt-sig", "room-1", "RoomUserJoined")))
	reqs := f.Requests()
	require.Len(t, reqs, 2, "the call is repeated once with a new signature")
	require.Equal(t, 70001, reqs[0].ErrorCode)
	require.Zero(t, reqs[1].ErrorCode, "the renewed UserSig verifies")
	require.Len(t, f.Messages("room-1"), 1)

	// Still refused after re-signing: retryable, not repeated again.
	f.FailNext(2, 70001, "usersig expired")
	err := s.Publish(context.Background(), roomMsg("evt-sig-2", "room-1", "RoomUserJoined"))
	require.Error(t, err)
	require.False(t, outbox.IsPermanent(err))
	require.Len(t, f.Requests(), 4)
}

// codeCases are the documented classes of Tencent's ErrorCodes, written
// out independently of the sink's table.
var codeCases = []struct {
	code        int
	permanent   bool
	unavailable bool
}{
	// retryable: busy, rate limited, internal
	{10002, false, false}, {10006, false, false}, {10008, false, false}, {10023, false, false}, {20004, false, false}, {20005, false, false},
	{60007, false, false}, {60008, false, false}, {60011, false, false}, {60014, false, false}, {60018, false, false}, {60019, false, false},
	{70050, false, false}, {70169, false, false}, {70500, false, false}, {90992, false, false}, {90994, false, false}, {90995, false, false}, {91000, false, false},
	// signature refused even after re-signing: retryable
	{70001, false, false}, {70052, false, false},
	// permanent: the message or its group (gone, muted, filtered, too long, malformed)
	{10003, true, false}, {10004, true, false}, {10010, true, false}, {10011, true, false}, {10015, true, false},
	{10016, true, false}, {10017, true, false}, {10019, true, false}, {70107, true, false}, {70402, true, false}, {70403, true, false},
	{80001, true, false}, {80002, true, false},
	{90001, true, false}, {90002, true, false}, {90007, true, false}, {90009, true, false}, {90010, true, false}, {93000, true, false},
	// unavailable: the app's configuration (permissions, identifier, UserSig key, plan, allowed IPs),
	// which every message fails on until an operator fixes it (issue 28, defect 13)
	{10007, false, true}, {10012, false, true}, {10026, false, true},
	{60002, false, true}, {60003, false, true}, {60004, false, true}, {60005, false, true}, {60006, false, true}, {60009, false, true}, {60010, false, true},
	{60012, false, true}, {60015, false, true}, {60016, false, true}, {60017, false, true}, {60020, false, true}, {60021, false, true},
	{70002, false, true}, {70003, false, true}, {70005, false, true}, {70009, false, true}, {70013, false, true}, {70014, false, true}, {70016, false, true}, {70020, false, true},
	{70051, false, true}, {70114, false, true},
	// unknown codes are retryable: never give up on an event for a code we do not know
	{12345, false, false}, {99999, false, false},
}

func TestEveryErrorCodeIsClassifiedAsDocumented(t *testing.T) {
	for _, tc := range codeCases {
		t.Run(strconv.Itoa(tc.code), func(t *testing.T) {
			f := newFake(t)
			s := newSink(t, f, nil)
			f.FailNext(2, tc.code, "scripted failure") // 2: a re-signed retry fails the same way
			err := s.Publish(context.Background(), roomMsg("evt-code", "room-1", "RoomUserJoined"))
			require.Error(t, err)
			require.Equal(t, tc.permanent, outbox.IsPermanent(err), "permanent?")
			require.Equal(t, tc.unavailable, outbox.IsUnavailable(err), "unavailable?")
			var apiErr *tencentim.Error
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, tc.code, apiErr.Code)
			require.Equal(t, tencentim.APISendGroupMsg, apiErr.API)
			require.Contains(t, err.Error(), fmt.Sprintf("tencentim: ErrorCode %d: scripted failure (%s)", tc.code, tencentim.APISendGroupMsg))
		})
	}
}

func TestTransportFailuresAreRetryable(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	m := roomMsg("evt-t", "room-1", "RoomUserJoined")

	err := publishHung(t, f, s, m)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a hung server is cut off by the caller's context")
	require.False(t, outbox.IsPermanent(err))
	require.Contains(t, err.Error(), "timed out")

	f.FailNextHTTP(1, http.StatusBadGateway)
	err = s.Publish(context.Background(), m)
	var apiErr *tencentim.Error
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, http.StatusBadGateway, apiErr.HTTPStatus)
	require.False(t, outbox.IsPermanent(err))

	f.MalformNext(1)
	err = s.Publish(context.Background(), m)
	require.ErrorContains(t, err, "unparseable response")
	require.False(t, outbox.IsPermanent(err))

	f.Close()
	err = s.Publish(context.Background(), m)
	require.Error(t, err, "connection refused")
	require.False(t, outbox.IsPermanent(err))
}

func TestMessagesThatCanNeverBeSentFailPermanentlyWithoutACall(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	cases := []struct {
		name string
		msg  outbox.Message
		is   error
	}{
		{"oversized", outbox.Message{ID: "big", Key: "room-1", Type: "T", Payload: []byte(strings.Repeat("x", 13<<10))}, tencentim.ErrMessageTooLarge},
		{"no group", outbox.Message{ID: "nokey", Type: "T", Payload: []byte("{}")}, tencentim.ErrNoGroup},
		{"not text", outbox.Message{ID: "bin", Key: "room-1", Type: "T", Payload: []byte{0xff, 0xfe}}, nil},
	}
	for _, c := range cases {
		err := s.Publish(context.Background(), c.msg)
		require.True(t, outbox.IsPermanent(err), c.name)
		if c.is != nil {
			require.ErrorIs(t, err, c.is, c.name)
		}
	}
	require.Empty(t, f.Requests(), "no call is made for a message that cannot be sent")

	f.RemoveGroup("room-gone")
	err := s.Publish(context.Background(), roomMsg("evt-gone", "room-gone", "RoomUserJoined"))
	require.True(t, outbox.IsPermanent(err), "a dismissed group is permanent")
	require.ErrorContains(t, err, "ErrorCode 10010")
}

func TestConcurrentPublishes(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, func(c *tencentim.Config) { c.RateLimit, c.GroupRateLimit = -1, -1 })
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Publish(context.Background(), roomMsg(fmt.Sprintf("c-%d", i), fmt.Sprintf("room-%d", i%7), "RoomGiftSent"))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, f.AllMessages(), 200)
}

// The fake really verifies what it receives: a wrong key, a non-admin
// identifier and an expired signature are refused as Tencent would.
func TestFakeVerifiesSignatureAndIdentity(t *testing.T) {
	f := newFake(t)
	m := roomMsg("evt-v", "room-1", "RoomUserJoined")

	wrongKey := newSink(t, f, func(c *tencentim.Config) { c.SecretKey = "another-key" })
	err := wrongKey.Publish(context.Background(), m)
	require.ErrorContains(t, err, "ErrorCode 70009")
	require.True(t, outbox.IsUnavailable(err), "a key that does not match the app never will, until an operator fixes it")

	notAdmin := newSink(t, f, func(c *tencentim.Config) { c.AdminIdentifier = "someone" })
	err = notAdmin.Publish(context.Background(), m)
	require.ErrorContains(t, err, "ErrorCode 60010")
	require.True(t, outbox.IsUnavailable(err))

	// Two days on, a one-day signature is expired: refused, re-signed and
	// tried once more (the module signs with the real clock, so the new
	// one is refused too), then reported as retryable.
	f.SetNow(func() time.Time { return time.Now().Add(48 * time.Hour) })
	s := newSink(t, f, nil)
	err = s.Publish(context.Background(), m)
	require.ErrorContains(t, err, "ErrorCode 70001")
	require.False(t, outbox.IsPermanent(err))
	require.Empty(t, f.AllMessages())
}

func TestTraceParentTravelsToTencent(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	m := roomMsg("evt-trace", "room-1", "RoomUserJoined")
	m.Headers = map[string]string{"traceparent": tp}
	require.NoError(t, s.Publish(context.Background(), m))
	m2 := roomMsg("evt-badtrace", "room-1", "RoomUserJoined")
	m2.Headers = map[string]string{"traceparent": "not a traceparent\r\nX-Injected: 1"}
	require.NoError(t, s.Publish(context.Background(), m2))
	reqs := f.Requests()
	require.Equal(t, tp, reqs[0].TraceParent)
	require.Empty(t, reqs[1].TraceParent, "a malformed traceparent is not passed on")
}

// closeCounter is a transport that counts CloseIdleConnections.
type closeCounter struct {
	http.RoundTripper
	closed int
}

func (c *closeCounter) CloseIdleConnections() { c.closed++ }

// TestCloseClosesOnlyItsOwnClient: Close closes the idle connections of
// the sink's own client, and leaves a client the caller gave alone.
func TestCloseClosesOnlyItsOwnClient(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	require.NoError(t, s.Publish(context.Background(), roomMsg("evt-1", "room-1", "RoomUserJoined")))
	require.NoError(t, s.Close())
	require.NoError(t, s.Publish(context.Background(), roomMsg("evt-2", "room-1", "RoomUserJoined")), "usable after Close")

	mine := &closeCounter{RoundTripper: http.DefaultTransport}
	s = newSink(t, f, func(c *tencentim.Config) { c.HTTPClient = &http.Client{Transport: mine} })
	require.NoError(t, s.Close())
	require.Zero(t, mine.closed, "the caller's client is the caller's to close")
}
