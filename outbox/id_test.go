package outbox

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNewID: a UUIDv7 in its usual form, later ones sorting after
// earlier ones, and no two alike.
func TestNewID(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	prev := ""
	for i := range 10_000 {
		id := newIDAt(t0.Add(time.Duration(i) * time.Millisecond))
		require.Regexp(t, form, id)
		require.False(t, seen[id], id)
		seen[id] = true
		require.Greater(t, id, prev, "time-ordered")
		prev = id
	}
	// Within one millisecond, and past 4,096 of them, still in order.
	for range 10_000 {
		id := newIDAt(t0.Add(10 * time.Second))
		require.Greater(t, id, prev, "in the order made")
		prev = id
	}
	require.Regexp(t, form, NewID())
	require.NoError(t, Message{ID: NewID(), Type: "T"}.Validate())
}
