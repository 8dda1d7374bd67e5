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
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/outboxrelay/outboxrelay/examples/activityservice/internal/activityservice"
)

const (
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main with its arguments, error stream and exit code.
func run(args []string, stderr io.Writer) int {
	flags := flag.NewFlagSet("activityservice", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "path of the YAML config file; without it, the settings come from the environment alone")
	flags.Usage = func() { usage(stderr, flags) }
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "activityservice: unexpected argument %q (flags: -config FILE)\n", flags.Arg(0))
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *configPath); err != nil {
		fmt.Fprintln(stderr, "activityservice:", err)
		return exitFailed
	}
	return 0
}

// usage prints the flags and the environment variables, by name only:
// their values may be secrets.
func usage(w io.Writer, flags *flag.FlagSet) {
	fmt.Fprintln(w, "usage: activityservice [-config FILE]")
	flags.PrintDefaults()
	fmt.Fprintln(w, "\nenvironment, overriding the file (a *_FILE variable names a file holding the value;")
	fmt.Fprintln(w, "the plain variable wins when both are set):")
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for _, s := range activityservice.EnvSettings {
		names := s.Var
		if s.FileVar != "" {
			names += ", " + s.FileVar
		}
		fmt.Fprintf(tw, "  %s\t%s\n", names, s.Key)
	}
	_ = tw.Flush()
}

func serve(ctx context.Context, path string) error {
	cfg, err := activityservice.LoadConfig(path)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	app, err := activityservice.NewApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	return app.Run(ctx)
}
