package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/outboxrelay/outboxrelay/inbox"
)

// Every valid UTF-8 ID of up to 255 characters is its own message ID,
// spaces and control characters included; others are refused before any
// handler runs.
func ExampleValidateID() {
	for _, id := range []string{"evt-1", "evt-1 ", "", "evt-\xff", strings.Repeat("x", 256)} {
		err := inbox.ValidateID(id)
		fmt.Printf("%q: %v\n", id[:min(len(id), 8)], err)
		if err != nil && !errors.Is(err, inbox.ErrInvalidID) {
			panic("not ErrInvalidID")
		}
	}
	// Output:
	// "evt-1": <nil>
	// "evt-1 ": <nil>
	// "": inbox: invalid message ID: the ID is empty
	// "evt-\xff": inbox: invalid message ID: the ID is not valid UTF-8
	// "xxxxxxxx": inbox: invalid message ID: the ID is longer than 255 characters
}

// An Observer sees how every Process call ended; outbox/outboxprom's
// InboxMetrics turns the events into Prometheus counters.
func ExampleObserverFunc() {
	obs := inbox.ObserverFunc(func(_ context.Context, e inbox.Event) {
		fmt.Printf("%s %s %s after %d transaction(s)\n", e.Consumer, e.ID, e.Kind, e.Attempts)
	})
	// An inbox calls it; here, by hand:
	obs.Observe(context.Background(), inbox.Event{Kind: inbox.EventProcessed, Consumer: "activity", ID: "evt-1", Attempts: 2})
	obs.Observe(context.Background(), inbox.Event{Kind: inbox.EventDuplicate, Consumer: "activity", ID: "evt-1", Attempts: 1})
	// Output:
	// activity evt-1 processed after 2 transaction(s)
	// activity evt-1 duplicate after 1 transaction(s)
}
