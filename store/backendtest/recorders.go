package backendtest

// Recorders of what a worker's hooks saw, for the suites' checks.

import (
	"context"
	"slices"
	"sync"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// eventLog collects observer events.
type eventLog struct {
	mu     sync.Mutex
	events []outbox.Event
}

func (l *eventLog) Observe(_ context.Context, e outbox.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) kinds() map[outbox.EventKind]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := map[outbox.EventKind]int{}
	for _, e := range l.events {
		n[e.Kind]++
	}
	return n
}

// count sums the Count of the events of kind k.
func (l *eventLog) count(k outbox.EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == k {
			n += e.Count
		}
	}
	return n
}

// deadCall is one call of an OnDead hook.
type deadCall struct {
	rec outbox.Record
	err error
}

// deadRecorder returns an OnDead hook that records its calls, and a
// function that returns a copy of them.
func deadRecorder() (func(context.Context, outbox.Record, error), func() []deadCall) {
	var mu sync.Mutex
	var calls []deadCall
	return func(_ context.Context, r outbox.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, deadCall{r, err})
		}, func() []deadCall {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(calls)
		}
}
