// Package outboxtest helps test code that uses the outbox, without a
// database or a real sink:
//
//   - NewStore is a complete store in memory (it passes the conformance
//     suites of store/backendtest), for unit tests of code that
//     enqueues messages or runs a worker;
//   - Recorder is a sink that remembers what it was handed, and FlakySink
//     one that fails, hangs or panics as a test tells it to;
//   - Logger routes a worker's logs to t.Log, and Eventually waits for a
//     condition without sleeping for a guessed time.
package outboxtest
