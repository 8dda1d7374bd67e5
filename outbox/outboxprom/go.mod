module github.com/outboxrelay/outboxrelay/outbox/outboxprom

go 1.26.0

// A module of its own, so that a user of outbox and store/mysql does not
// require the Prometheus client.
require (
	github.com/outboxrelay/outboxrelay v0.2.0
	github.com/prometheus/client_golang v1.25.0
)

// For tests only:
//   - testify: require, in the tests
//   - client_model: the gathered metric types, to check the monitoring files
//   - yaml: to parse the alert rules (both already in the graph, through
//     client_golang and prometheus/common, at these versions)
require (
	github.com/prometheus/client_model v0.6.3
	github.com/stretchr/testify v1.12.1
	go.yaml.in/yaml/v3 v3.0.6
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/kylelemons/godebug v1.1.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
