package tencentim_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
)

// wrongSecret signs the UserSigs of the misconfigured sink: the app's
// key was rotated and the service not told.
const wrongSecret = "rotated-away-key-9c1e5b7f3a2d4e6f"

// TestConformance runs the sink suite against the local fake of the
// REST API (tencentimtest), one fake per sink: it verifies each UserSig
// with Tencent's module, keeps each group's messages in order and drops
// a repeated Random within five minutes as Tencent does. Taking the
// peer away leaves every call unanswered (SetDown).
func TestConformance(t *testing.T) {
	var (
		mu    sync.Mutex
		fakes []*tencentimtest.Server
	)
	setDown := func(down bool) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range fakes {
			f.SetDown(down)
		}
	}
	sinktest.Run(t, sinktest.Peer{
		NewSink: func(t *testing.T) sinktest.Target {
			f := newFake(t)
			mu.Lock()
			fakes = append(fakes, f)
			mu.Unlock()
			return sinktest.Target{Sink: newSink(t, f, nil), Received: func() ([]sinktest.Delivery, error) { return fakeDeliveries(f) }}
		},
		Stop:  func(*testing.T) { setDown(true) },
		Start: func(*testing.T) { setDown(false) },
		Unacceptable: []outbox.Message{
			{ID: "payload-not-utf8", Type: "T", Key: "room-1", Payload: []byte{0xff, 0xfe}},
			{ID: "payload-too-large", Type: "T", Key: "room-1", Payload: []byte(strings.Repeat("x", tencentim.DefaultMaxMessageBytes))},
			{ID: "no-group", Type: "T", Key: "", Payload: []byte("{}")},
			{ID: "group-id-too-long", Type: "T", Key: strings.Repeat("g", 49), Payload: []byte("{}")},
		},
		Misconfigured: func(t *testing.T) outbox.Sink {
			return newSink(t, newFake(t), func(c *tencentim.Config) { c.SecretKey = wrongSecret })
		},
		Secrets:     []string{secret, wrongSecret},
		Ordered:     true,
		DedupesByID: true,
	})
}

// fakeDeliveries is what the fake's groups received, in order, decoded
// back into the fields of the messages: the group is the key, Data the
// payload, Ext the event ID and type.
func fakeDeliveries(f *tencentimtest.Server) ([]sinktest.Delivery, error) {
	var out []sinktest.Delivery
	for _, m := range f.AllMessages() {
		if len(m.Elems) != 1 {
			return nil, fmt.Errorf("group %q got a message of %d elements, want 1", m.GroupID, len(m.Elems))
		}
		var ext struct {
			EventID   string `json:"event_id"`
			EventType string `json:"event_type"`
		}
		if err := json.Unmarshal([]byte(m.Elems[0].Ext), &ext); err != nil {
			return nil, fmt.Errorf("group %q: Ext is not JSON: %w", m.GroupID, err)
		}
		out = append(out, sinktest.Delivery{ID: ext.EventID, Key: m.GroupID, Type: ext.EventType, Payload: []byte(m.Elems[0].Data)})
	}
	return out, nil
}

func TestFakeDeliveriesNeedOneElement(t *testing.T) {
	_, err := fakeDeliveries(newFake(t))
	require.NoError(t, err)
}
