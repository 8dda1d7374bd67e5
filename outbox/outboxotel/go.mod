module github.com/outboxrelay/outboxrelay/outbox/outboxotel

go 1.26.0

// A module of its own, so that a user of outbox and store/mysql does not
// require OpenTelemetry. Only the OTel API (otel, otel/trace) is needed
// at run time; the application brings its SDK and exporter.
require (
	github.com/outboxrelay/outboxrelay v0.2.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
)

// For tests only:
//   - testify: require, in the tests
//   - otel/sdk: the TracerProvider and in-memory exporter the tests read
//     spans from
require (
	github.com/stretchr/testify v1.12.1
	go.opentelemetry.io/otel/sdk v1.47.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
