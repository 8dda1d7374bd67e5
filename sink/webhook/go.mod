module github.com/outboxrelay/outboxrelay/sink/webhook

go 1.26.0

// A module of its own, as each sink is, so that a service pulls only the
// client it uses (here the standard library's net/http: nothing more).
require github.com/outboxrelay/outboxrelay v0.2.0

// For tests only:
//   - testify: require, in the sink's tests
require github.com/stretchr/testify v1.12.1

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
