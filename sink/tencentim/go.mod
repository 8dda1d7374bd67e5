module github.com/outboxrelay/outboxrelay/sink/tencentim

go 1.26.0

// A module of its own (as Watermill ships each pub/sub), so that a user of
// outbox and store/mysql does not require the UserSig library and x/time.
require (
	github.com/outboxrelay/outboxrelay v0.2.0
	github.com/tencentyun/tls-sig-api-v2-golang v1.4.0
	golang.org/x/time v0.16.0
)

// For tests only:
//   - testify: require, in the sink's tests
require github.com/stretchr/testify v1.12.1

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/go-sql-driver/mysql v1.10.1 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
