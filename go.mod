module github.com/outboxrelay/outboxrelay

go 1.26.0

// What the library's packages need: outbox (retry policies on backoff)
// and store/mysql (the driver).
require (
	github.com/cenkalti/backoff/v4 v4.3.0
	github.com/go-sql-driver/mysql v1.10.1
)

// For tests only. No package that a user of outbox and store/mysql builds
// imports these, but Go lists in go.mod every module a test of this
// module needs, so they (and most of the indirect block below) appear in
// a user's `go list -m all`, though never in a user's build.
//   - testify: require, in every test and in the conformance suites
//     (store/backendtest) that a store's tests run.
//   - goleak: backendtest checks that a worker leaves no goroutine.
// (testcontainers-go, which starts a test database where none is given,
// is required by the module internal/testcontainer alone, which
// internal/testutil runs as a program: here it would list some fifty
// modules in every user's go list -m all.)
require (
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	go.yaml.in/yaml/v3 v3.0.6 // indirect
)
