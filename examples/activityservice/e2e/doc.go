// Package e2e holds the end-to-end test of room-service and
// activity-service as real processes, with MariaDB and NATS JetStream,
// behind the build tag e2e:
//
//	cd examples && OUTBOXRELAY_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' \
//	  go test -race -tags e2e -count=1 -v -run TestEndToEnd ./activityservice/e2e/
//
// It builds both binaries, sends a few hundred room commands through
// room-service's HTTP API while it SIGKILLs activity-service twice and
// kills its MySQL connections once, and then checks that every user's
// activity equals what the accepted commands imply, and that each level
// threshold crossed gave exactly one UserLevelUp. It fails, never skips,
// when MariaDB (OUTBOXRELAY_TEST_MYSQL_DSN) or NATS
// (OUTBOXRELAY_TEST_NATS_URL, default nats://127.0.0.1:4222) is missing.
package e2e
