package testutil

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// leakWait bounds how long VerifyNoLeaks waits for goroutines to end.
const leakWait = time.Minute

// VerifyNoLeaks fails t if goroutines that opts do not ignore are still
// running once leakWait has passed. Closing a connection (a NATS client's,
// an HTTP keep-alive) ends its goroutines soon after, not at once;
// goleak.VerifyNone alone waits for them about half a second, which a
// loaded machine can exceed. It returns as soon as none is left.
func VerifyNoLeaks(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(leakWait)
	for {
		err := goleak.Find(opts...) // retries for about half a second itself
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines still running after %v: %v", leakWait, err)
			return
		}
	}
}
