package headernames

import (
	"slices"
	"testing"
)

func TestMatching(t *testing.T) {
	h := map[string]string{"Outbox-Event-ID": "", "outbox-event-type": "", "outbox-event": "", "traceparent": "", "OUTBOX-EVENT-x": ""}
	got := Matching(h, func(n string) bool { return HasPrefixFold(n, "outbox-event-") })
	if want := []string{"OUTBOX-EVENT-x", "Outbox-Event-ID", "outbox-event-type"}; !slices.Equal(got, want) {
		t.Fatalf("Matching = %q, want %q", got, want)
	}
	if HasPrefixFold("out", "outbox-") {
		t.Fatal("a name shorter than the prefix matched")
	}
}
