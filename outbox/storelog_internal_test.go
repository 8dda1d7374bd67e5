package outbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFailureStreak (issue 37, defect 9): the first failure and a change
// of error are logged at once; repeats of one error once per
// storeFailureReportEvery, with the count of those left out since the
// last line; a success ends the streak with its totals, and the next
// failure starts a new one.
func TestFailureStreak(t *testing.T) {
	var f failureStreak
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	_, ended := f.succeeded(t0)
	require.False(t, ended, "no streak to end")
	note, c := f.failed(t0, "table gone")
	require.Equal(t, streakFirst, note)
	require.Equal(t, streakCounts{failures: 1}, c)
	for i := 1; i < 60; i++ { // a failure a second
		note, _ = f.failed(at(time.Duration(i)*time.Second), "table gone")
		require.Equal(t, streakQuiet, note, i)
	}
	note, c = f.failed(at(storeFailureReportEvery), "table gone")
	require.Equal(t, streakStill, note)
	require.Equal(t, streakCounts{failures: 61, left: 59, failing: time.Minute}, c)
	note, _ = f.failed(at(storeFailureReportEvery+time.Second), "table gone")
	require.Equal(t, streakQuiet, note, "the next summary is a minute off")

	note, c = f.failed(at(62*time.Second), "connection refused")
	require.Equal(t, streakChanged, note)
	require.Equal(t, streakCounts{failures: 63, left: 1, failing: 62 * time.Second}, c)
	note, _ = f.failed(at(63*time.Second), "table gone")
	require.Equal(t, streakChanged, note, "back to the first error: a change too")
	f.failed(at(64*time.Second), "table gone")

	c, ended = f.succeeded(at(65 * time.Second))
	require.True(t, ended)
	require.Equal(t, streakCounts{failures: 65, left: 1, failing: 65 * time.Second}, c)
	_, ended = f.succeeded(at(66 * time.Second))
	require.False(t, ended)
	note, c = f.failed(at(67*time.Second), "table gone")
	require.Equal(t, streakFirst, note, "a new streak")
	require.Equal(t, streakCounts{failures: 1}, c)
}
