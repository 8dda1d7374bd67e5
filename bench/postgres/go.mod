module github.com/outboxrelay/outboxrelay/bench/postgres

go 1.26.0

// A module of its own, so that neither the library nor the MySQL bench
// (bench/) requires River, pgx or Watermill's PostgreSQL code.

require (
	github.com/ThreeDotsLabs/watermill-sql/v4 v4.1.2
	github.com/jackc/pgx/v5 v5.12.0
	github.com/outboxrelay/outboxrelay v0.2.0
	github.com/outboxrelay/outboxrelay/bench v0.2.0
	github.com/outboxrelay/outboxrelay/store/postgres v0.2.0
	github.com/riverqueue/river v0.51.2
	github.com/riverqueue/river/riverdriver/riverpgxv5 v0.51.2
)

require (
	github.com/ThreeDotsLabs/watermill v1.5.1 // indirect
	github.com/cenkalti/backoff/v4 v4.3.0 // indirect
	github.com/cenkalti/backoff/v5 v5.0.3 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/lib/pq v1.10.9 // indirect
	github.com/lithammer/shortuuid/v3 v3.0.7 // indirect
	github.com/oklog/ulid v1.3.1 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/riverqueue/river/riverdriver v0.51.2 // indirect
	github.com/riverqueue/river/rivershared v0.51.2 // indirect
	github.com/riverqueue/river/rivertype v0.51.2 // indirect
	github.com/sony/gobreaker v1.0.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.2.0 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
