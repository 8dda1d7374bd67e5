package outbox

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// nilStore is a Store that the round below never calls.
type nilStore struct{ backend.Store }

func (nilStore) Capabilities() backend.Capabilities { return backend.Capabilities{} }

// TestAReleasedRecordHoldsItsKeyBack: with Ordering, a record released
// untried because the sink is held off holds the rest of its key back,
// even when the sink comes back before the next record of the key is
// decided (another group's probe went through meanwhile). Before, the
// next record was published while the one before it went back to the
// store: a per-key order violation, the one CI's MariaDB fault run
// found for a named consumer (its worker had been holding off the sink
// through sink-503 and sink-down).
func TestAReleasedRecordHoldsItsKeyBack(t *testing.T) {
	var (
		mu        sync.Mutex
		published []string
	)
	sink := SinkFunc(func(_ context.Context, m Message) error {
		mu.Lock()
		defer mu.Unlock()
		published = append(published, m.ID)
		return nil
	})
	w, err := NewWorker(nilStore{}, sink, WorkerOptions{Ordering: true, Concurrency: 1, PollInterval: time.Second})
	require.NoError(t, err)
	w.breaker.failed(time.Now(), true, false) // Unavailable: held off at once
	require.True(t, w.breaker.heldOff())
	// The sink comes back (a probe elsewhere went through) after the
	// round released k-1, before it decides about k-2.
	w.beforeDecide = func(rec Record) {
		if rec.ID == "k-2" {
			w.breaker.succeeded(time.Now())
		}
	}
	batch := backend.Batch{Token: "t", Records: []Record{
		{Message: Message{ID: "k-1", Key: "k", Type: "T"}, Seq: 1},
		{Message: Message{ID: "k-2", Key: "k", Type: "T"}, Seq: 2},
		{Message: Message{ID: "k-3", Key: "k", Type: "T"}, Seq: 3},
	}}
	s := w.publishLeased(context.Background(), PathWorker, batch, time.Now(), time.Minute, gateHeld)
	require.False(t, w.breaker.heldOff(), "the sink came back during the round")
	require.Empty(t, published, "k-2 and k-3 must not go out before k-1")
	for i, o := range s.outcomes {
		require.Equal(t, backend.OutcomeRelease, o.Kind, "record %d", i)
	}

	// Unordered, a released record holds nothing back.
	published = nil
	w.opts.Ordering = false
	w.breaker.failed(time.Now(), true, false)
	s = w.publishLeased(context.Background(), PathWorker, batch, time.Now(), time.Minute, gateHeld)
	require.Equal(t, []string{"k-2", "k-3"}, published)
	require.Equal(t, backend.OutcomeRelease, s.outcomes[0].Kind)
}
