module github.com/outboxrelay/outboxrelay/sink/kafka

go 1.26.0

// A module of its own, so that a user of outbox and store/mysql does not
// require franz-go.
//
// For tests only: kfake (franz-go's in-process Kafka cluster, the peer of
// every test; it has no tagged versions) with kmsg, testify and goleak.
require (
	github.com/outboxrelay/outboxrelay v0.2.0
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
