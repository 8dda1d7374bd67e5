package svckit

import (
	"context"
	"time"
)

// WaitFor calls f every second until it succeeds, or until ctx ends or
// timeout has passed, for a server that may still be starting beside the
// service (MySQL, NATS, a stream another service creates). It returns
// nil, or the last error before the deadline: the call the deadline cuts
// short says only "i/o timeout" or "context deadline exceeded".
func WaitFor(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		err := f(ctx)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return last
		case <-time.After(time.Second):
		}
	}
}
