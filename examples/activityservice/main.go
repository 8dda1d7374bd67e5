// Command activityservice keeps per-user activity (gifts sent and
// received, rooms joined, levels) from room-service's events: the
// consuming side of the outbox. It reads the events room-service relays
// to NATS JetStream with a durable pull consumer and explicit acks,
// applies each through an idempotent inbox in its own MySQL database (so
// a redelivery changes nothing), and publishes UserLevelUp events
// through an outbox of its own.
//
//	go run ./examples/activityservice -config examples/activityservice/config.yaml
//
// The environment overrides the file (MYSQL_DSN, MYSQL_DSN_FILE,
// NATS_URL, NATS_URL_FILE, ACTIVITY_*; see -h), and without -config it
// is the whole configuration.
package main

import (
	"io"
	"os"

	"github.com/outboxrelay/outboxrelay/examples/activityservice/internal/activityservice"
	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main with its arguments, error stream and exit code.
func run(args []string, stderr io.Writer) int {
	return svckit.Main(args, stderr, svckit.Command{
		Name:  "activityservice",
		Env:   svckit.EnvVars(activityservice.EnvSettings),
		Serve: svckit.Serve(activityservice.LoadConfig, activityservice.NewApp),
	})
}
