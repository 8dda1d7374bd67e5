module github.com/outboxrelay/outboxrelay/sink/natsjs

go 1.26.0

// A module of its own (as Watermill ships each pub/sub), so that a user of
// outbox and store/mysql does not require nats.go.
require (
	github.com/nats-io/nats.go v1.55.0
	github.com/outboxrelay/outboxrelay v0.2.0
)

// For tests only:
//   - testify: require, in the sink's tests
require github.com/stretchr/testify v1.12.1

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	github.com/klauspost/compress v1.20.1 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
