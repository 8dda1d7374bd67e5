package watermill_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

// publisherFunc is a message.Publisher from a function, for the cases
// no broker can produce on demand (a panic, a hang, a secret in an
// error). Delivery itself is tested on the real brokers only.
type publisherFunc func(topic string, msgs ...*message.Message) error

func (f publisherFunc) Publish(topic string, msgs ...*message.Message) error {
	return f(topic, msgs...)
}
func (f publisherFunc) Close() error { return nil }

var nopPublisher = publisherFunc(func(string, ...*message.Message) error { return nil })

func TestConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  wmsink.Config
		want string
	}{
		{"no publisher", wmsink.Config{Topic: "t"}, "watermill: Publisher: required"},
		{"no topic", wmsink.Config{Publisher: nopPublisher}, "watermill: Topic: required unless TopicFor is set"},
		{"topic with NUL", wmsink.Config{Publisher: nopPublisher, Topic: "a\x00"}, `watermill: Topic "a\x00": has the control character`},
		{"topic too long", wmsink.Config{Publisher: nopPublisher, Topic: strings.Repeat("t", 256)}, "is 256 bytes, over MaxTopicBytes (255)"},
		{"negative MaxInFlight", wmsink.Config{Publisher: nopPublisher, Topic: "t", MaxInFlight: -1}, "watermill: MaxInFlight -1: must be between 1 and 4096"},
		{"negative CloseTimeout", wmsink.Config{Publisher: nopPublisher, Topic: "t", CloseTimeout: -time.Second}, "watermill: CloseTimeout -1s: must be >= 0"},
		{"empty Redact", wmsink.Config{Publisher: nopPublisher, Topic: "t", Redact: []string{""}}, "watermill: Redact[0]: empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wmsink.New(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestConfigDefaultsAndOverrides(t *testing.T) {
	s, err := wmsink.New(wmsink.Config{Publisher: nopPublisher, Topic: "t"})
	require.NoError(t, err)
	require.Contains(t, s.String(), fmt.Sprintf("MaxInFlight:%d CloseTimeout:%v", wmsink.DefaultMaxInFlight, wmsink.DefaultCloseTimeout))
	s, err = wmsink.New(wmsink.Config{Publisher: nopPublisher, Topic: "t", MaxInFlight: 3, CloseTimeout: time.Second})
	require.NoError(t, err)
	require.Contains(t, s.String(), "MaxInFlight:3 CloseTimeout:1s")
}

// TestMessageMapping: the UUID is the ID, headers are metadata, reserved
// names are left out, and the key is there only when set.
func TestMessageMapping(t *testing.T) {
	s := newSink(t, wmsink.Config{Publisher: nopPublisher, Topic: "t"})
	m := outbox.Message{ID: "e-1", Type: "T", Key: "k", Payload: []byte("p"), Headers: map[string]string{
		"x-a": "1", "Outbox-Event-Type": "forged", "_watermill_message_uuid": "forged", "_WATERMILL_delayed_until": "x"}}
	wm := s.Message(m)
	require.Equal(t, "e-1", wm.UUID)
	require.Equal(t, message.Payload("p"), wm.Payload)
	require.Equal(t, message.Metadata{"x-a": "1", wmsink.MetadataEventID: "e-1", wmsink.MetadataEventType: "T", wmsink.MetadataEventKey: "k"}, wm.Metadata)
	m.Key = ""
	require.NotContains(t, s.Message(m).Metadata, wmsink.MetadataEventKey)
}

// TestReservedPrefixesIsACopy: what ReservedPrefixes returns names the
// prefixes Message leaves out, and changing it changes nothing in the
// sink (it was a package variable that any importer could overwrite).
func TestReservedPrefixesIsACopy(t *testing.T) {
	prefixes := wmsink.ReservedPrefixes()
	require.Equal(t, []string{"outbox-event-", "_watermill_"}, prefixes)
	for i := range prefixes {
		prefixes[i] = "x-"
	}
	require.Equal(t, []string{"outbox-event-", "_watermill_"}, wmsink.ReservedPrefixes())
	s := newSink(t, wmsink.Config{Publisher: nopPublisher, Topic: "t"})
	wm := s.Message(outbox.Message{ID: "e-1", Headers: map[string]string{"x-a": "1", "_watermill_x": "forged"}})
	require.Equal(t, "1", wm.Metadata["x-a"])
	require.NotContains(t, wm.Metadata, "_watermill_x")
}

// TestPublisherThatHangs: a publisher that ignores the context is left
// to finish; Publish returns by its deadline with a retryable error,
// MaxInFlight bounds the calls left, and Close waits for them.
func TestPublisherThatHangs(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 10)
	hang := publisherFunc(func(string, ...*message.Message) error { entered <- struct{}{}; <-release; return nil })
	s, err := wmsink.New(wmsink.Config{Publisher: hang, Topic: "t", MaxInFlight: 2, CloseTimeout: time.Minute})
	require.NoError(t, err)
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err := s.Publish(ctx, event(fmt.Sprint(i), "k"))
		cancel()
		require.Error(t, err)
		require.False(t, outbox.IsPermanent(err), "%v", err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	}
	require.Len(t, entered, 2, "the third call waited for a slot and never reached the publisher")
	closed := make(chan error)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while calls were in the publisher")
	default:
	}
	close(release)
	require.NoError(t, <-closed)
	require.ErrorIs(t, s.Publish(context.Background(), event("after", "k")), wmsink.ErrClosed)
}

// TestCloseTimeout: Close gives up on a publisher that never returns,
// and says so.
func TestCloseTimeout(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	hang := publisherFunc(func(string, ...*message.Message) error { <-release; return nil })
	s, err := wmsink.New(wmsink.Config{Publisher: hang, Topic: "t", CloseTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.Error(t, s.Publish(ctx, event("e", "k")))
	require.ErrorContains(t, s.Close(), "1 publish calls still in the publisher after CloseTimeout (50ms)")
}

func TestErrorClasses(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name                   string
		pub                    publisherFunc
		classify               func(error) wmsink.Class
		permanent, unavailable bool
		want                   string
	}{
		{"unknown error is retryable", func(string, ...*message.Message) error { return boom }, nil, false, false,
			`watermill: publish failed: boom (event "e-1", topic "t")`},
		{"Classify Permanent", func(string, ...*message.Message) error { return boom }, func(error) wmsink.Class { return wmsink.Permanent }, true, false,
			"watermill: refused by the broker: boom"},
		{"Classify Unavailable", func(string, ...*message.Message) error { return boom }, func(error) wmsink.Class { return wmsink.Unavailable }, false, true,
			"watermill: destination not available: boom"},
		{"panic is retryable", func(string, ...*message.Message) error { panic("oops") }, nil, false, false,
			"watermill: publish failed: watermill: the publisher panicked: oops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := newSink(t, wmsink.Config{Publisher: tc.pub, Topic: "t", Classify: tc.classify, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			err := publish(t, s, event("e-1", "k"))
			require.ErrorContains(t, err, tc.want)
			require.Equal(t, tc.permanent, outbox.IsPermanent(err))
			require.Equal(t, tc.unavailable, outbox.IsUnavailable(err))
		})
	}
}

// TestRedact: a secret in a publisher's error reaches no error text,
// wrapped error, or log line.
func TestRedact(t *testing.T) {
	const secret = "hunter2-0123456789abcdef"
	leaky := publisherFunc(func(string, ...*message.Message) error {
		return fmt.Errorf("dial amqp://u:%s@host: %w", secret, context.DeadlineExceeded)
	})
	var logs bytes.Buffer
	s := newSink(t, wmsink.Config{Publisher: leaky, Topic: "t", Redact: []string{secret}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	err := publish(t, s, event("e-1", "k"))
	require.ErrorIs(t, err, context.DeadlineExceeded, "sentinels survive the scrub")
	for e := error(err); e != nil; e = errors.Unwrap(e) {
		require.NotContains(t, fmt.Sprintf("%v %+v %#v", e, e, e), secret)
	}
	require.NotContains(t, logs.String(), secret)
	require.NotContains(t, fmt.Sprintf("%v %+v %#v %s", s, s, s, s), secret)
}

// TestNoTopic: TopicFor's error and a bad answer are permanent.
func TestNoTopic(t *testing.T) {
	calls := 0
	counting := publisherFunc(func(string, ...*message.Message) error { calls++; return nil })
	s := newSink(t, wmsink.Config{Publisher: counting, TopicFor: func(m outbox.Message) (string, error) {
		if m.Key == "bad" {
			return "", errors.New("unknown room")
		}
		return "", nil
	}})
	for _, key := range []string{"bad", "empty"} {
		err := publish(t, s, event("e-"+key, key))
		require.True(t, outbox.IsPermanent(err))
		require.ErrorIs(t, err, wmsink.ErrNoTopic)
	}
	require.Zero(t, calls, "nothing sent")
}
