// Package backend is the contract between the outbox worker and the
// store that keeps its messages: what a store implements, and nothing a
// writer or a sink needs to meet.
//
// A store implements Store: Enqueue and Get for writers, Claim and
// Settle for workers. A claim leases due pending records for a while
// under a random token and commits before the worker publishes anything;
// Settle records what happened to each (an Outcome), fenced by that
// token, so that a worker whose lease has run out cannot overwrite the
// result of the one that took over. Optional interfaces add what a store
// can do better or more of: SettleClaimer (one commit per batch),
// StatsReader (backlog figures) and Purger (retention).
//
// The data a store keeps is Message and Record, which package outbox
// names for writers and sinks (outbox.Message is backend.Message).
//
// store/backendtest holds the conformance suites every store runs
// against a real database; outbox/outboxtest.NewStore is a complete
// store in memory that passes them, and store/mysql and store/postgres
// are the ones for MySQL and MariaDB and for PostgreSQL.
package backend
