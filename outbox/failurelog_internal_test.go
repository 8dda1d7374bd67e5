package outbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLineLimiter: at most failureLines lines per failureWindow; the rest
// are counted, and the count is handed out once, with the first line (or
// flush) of a later window.
func TestLineLimiter(t *testing.T) {
	var l lineLimiter
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range failureLines {
		ok, dropped := l.allow(t0.Add(time.Duration(i) * time.Millisecond))
		require.True(t, ok, i)
		require.Zero(t, dropped)
	}
	for i := range 30 {
		ok, dropped := l.allow(t0.Add(time.Second + time.Duration(i)*time.Millisecond))
		require.False(t, ok)
		require.Zero(t, dropped)
	}
	require.Zero(t, l.flush(t0.Add(failureWindow-time.Millisecond)), "the window has not ended")
	ok, dropped := l.allow(t0.Add(failureWindow))
	require.True(t, ok)
	require.Equal(t, 30, dropped, "reported once")
	require.Zero(t, l.flush(t0.Add(3*failureWindow)))

	for range failureLines + 7 {
		l.allow(t0.Add(4 * failureWindow))
	}
	require.Equal(t, 7, l.flush(t0.Add(5*failureWindow)))
	require.Zero(t, l.flush(t0.Add(5*failureWindow)))
}
