package outbox

import (
	"context"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// How Run behaves while the worker holds off its sink (see SinkBreaker):
// it claims nothing until the breaker's next probe is due, then claims
// one record for the probe.

// nextRound returns the claim of Run's next round and how it treats a
// held-off sink, or, while the sink is held off and no probe is due, how
// long until one is (and no round).
func (w *Worker) nextRound() (backend.ClaimParams, gate, time.Duration) {
	params := w.claimParams()
	switch adm, wait := w.breaker.admit(time.Now()); adm {
	case refused:
		return params, gateHeld, wait
	case probe:
		params.Limit = 1 // one record tells whether the sink is back; the rest stays due
		return params, gateProbe, 0
	}
	return params, gateHeld, 0
}

// awaitProbe is Run's wait while the sink is held off: it records carry,
// the outcomes of a batch that ended as the sink was held off (no round
// follows at once to record them), and waits until the next probe is
// due (wait), Run is woken (a probe that went through, or work left by
// PublishNow, which Run looks at and goes on waiting for), or ctx ends:
// then it returns false.
func (w *Worker) awaitProbe(ctx context.Context, timer *time.Timer, carry **settlement, wait time.Duration) bool {
	if *carry != nil {
		_, _ = w.settle(ctx, *carry)
		*carry = nil
	}
	if ctx.Err() != nil {
		return false
	}
	w.flushFailureLines(ctx)
	timer.Reset(wait)
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
	case <-w.wake:
	}
	return true
}
