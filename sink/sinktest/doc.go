// Package sinktest is the conformance suite every outbox.Sink runs
// against its real peer (a broker, an endpoint) or a faithful fake of
// one: the promises a worker relies on, checked from outside.
//
//	func TestConformance(t *testing.T) {
//		sinktest.Run(t, sinktest.Peer{
//			NewSink:       newTarget,   // a sink on a destination of its own, and a reader of it
//			Stop:          srv.Stop,    // the broker goes away …
//			Start:         srv.Start,   // … and comes back
//			Unacceptable:  []outbox.Message{tooLarge},
//			Misconfigured: sinkWithoutTopic,
//			Secrets:       []string{password},
//			Ordered:       true,
//			DedupesByID:   true,
//			KeepsHeaders:  true,
//		})
//	}
//
// Run's checks, each a subtest:
//
//   - Delivers: payload, headers, ID, key and type arrive as they were
//     handed over, also from concurrent calls; a repeat is not an error,
//     and where the peer dedupes by ID it holds one copy.
//   - HostileMessages: control characters, CR and LF in header values and
//     IDs, invalid UTF-8 payloads, huge payloads and long keys are each
//     delivered unchanged or refused as Permanent (never a plain error,
//     which would be retried forever), and the sink still delivers
//     afterwards.
//   - Ordered (Peer.Ordered): one key's messages arrive in the order they
//     were published, while other keys publish at the same time.
//   - Unacceptable: each of Peer.Unacceptable fails as Permanent (not
//     Unavailable), and is not held.
//   - Misconfigured: a sink whose destination is not set up fails as
//     Unavailable.
//   - Context: a cancelled or expired context gives an error that is
//     not Permanent (or a delivery), and returns.
//   - Secrets: none of Peer.Secrets in the sink printed with %v, %+v,
//     %#v or %s, logged through slog, or in any error the suite meets or
//     any error those wrap (errors.Join trees included).
//   - Outage: a real outbox.Worker on an in-memory store delivers while
//     the peer is stopped and started again; calls made while it is down
//     return by their deadline or cancellation with errors that are not
//     Permanent; in the end every message is published and held, once
//     where the peer dedupes, in order where it is Ordered.
//   - NoGoroutineLeak: once the checks are over and their sinks closed,
//     no goroutine they started is left.
//
// Every wait is a poll with a generous bound (WaitTimeout): the suite
// asserts what happens, never how fast, so it holds on a loaded machine.
package sinktest
