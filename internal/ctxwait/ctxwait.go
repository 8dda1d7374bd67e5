// Package ctxwait waits for a time or a context, whichever ends first:
// the pause between two tries that every retry loop of the repository
// takes, written once.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends: then it returns ctx.Err(). A d of
// zero or less returns at once (ctx.Err(), nil while ctx is live).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
