package outbox

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBreakerProbeSchedule (issue 37, defect 7): once the sink is held
// off, one caller at a time gets the probe, the first PollInterval after,
// then at waits that double after each failed probe up to
// MaxProbeInterval; calls that were not probes change nothing; a probe
// that made no call leaves the wait as it was; a success ends it all.
func TestBreakerProbeSchedule(t *testing.T) {
	const poll = time.Second
	b := newBreaker(SinkBreaker{Failures: 2, MaxProbeInterval: 5 * time.Second}, poll)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	adm, _ := b.admit(t0)
	require.Equal(t, admitted, adm)
	require.False(t, b.failed(t0, false, false).opened)
	require.True(t, b.failed(t0, false, false).opened, "Failures in a row")

	adm, wait := b.admit(at(time.Millisecond))
	require.Equal(t, refused, adm)
	require.Equal(t, poll-time.Millisecond, wait, "the first probe comes PollInterval after")
	require.Equal(t, breakerChange{}, b.failed(at(10*time.Millisecond), false, false), "a call in flight when it opened is no probe")

	adm, _ = b.admit(at(poll))
	require.Equal(t, probe, adm)
	adm, wait = b.admit(at(2 * poll))
	require.Equal(t, refused, adm, "one probe at a time, however long it takes")
	require.Equal(t, poll, wait)
	b.failed(at(2*poll), true, true)
	b.endProbe()

	// Failed probes double the wait: 2 s, 4 s, then 5 s (the cap).
	now := 2 * poll
	for _, want := range []time.Duration{2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		adm, wait = b.admit(at(now))
		require.Equal(t, refused, adm)
		require.Equal(t, want, wait)
		now += want
		adm, _ = b.admit(at(now))
		require.Equal(t, probe, adm, "at %v", now)
		b.failed(at(now), false, true)
		b.endProbe()
	}

	// A probe that found nothing to call the sink for: the next one is
	// as far off as that one was.
	now += 5 * time.Second
	adm, _ = b.admit(at(now))
	require.Equal(t, probe, adm)
	b.endProbe()
	_, wait = b.admit(at(now))
	require.Equal(t, 5*time.Second, wait)

	ch := b.succeeded(at(now + time.Second))
	require.True(t, ch.closed)
	require.Equal(t, 5, ch.failures, "the failed probes")
	adm, _ = b.admit(at(now + time.Second))
	require.Equal(t, admitted, adm)

	off := newBreaker(SinkBreaker{Off: true}, poll)
	off.failed(t0, true, false)
	adm, _ = off.admit(t0)
	require.Equal(t, admitted, adm, "Off: never held off")
}
