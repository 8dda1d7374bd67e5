// Command roomservice is a small live-room backend that shows the outbox
// end to end: room commands over HTTP change MySQL state and write their
// events in the same transaction, the events are published to Tencent
// Cloud IM right after commit, and a worker delivers whatever that could
// not.
//
//	go run ./examples/roomservice -demo                 # the whole loop, narrated
//	go run ./examples/roomservice -config config.yaml   # the service
//
// The demo takes MySQL from -dsn or MYSQL_DSN; without either it starts a
// MySQL container where Docker runs, and otherwise an embedded engine.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A flag set of our own: the embedded engine's vitess dependency
	// registers flags on the global one.
	flags := flag.NewFlagSet("roomservice", flag.ExitOnError)
	configPath := flags.String("config", "", "path of the YAML config file")
	demo := flags.Bool("demo", false, "run the end-to-end demo and exit")
	dsn := flags.String("dsn", os.Getenv("MYSQL_DSN"), "demo only: MySQL server DSN (default $MYSQL_DSN)")
	_ = flags.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case *demo:
		err = runDemo(ctx, os.Stdout, *dsn)
	case *configPath == "":
		err = fmt.Errorf("-config PATH is required (or -demo)")
	default:
		err = serve(ctx, *configPath)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "roomservice:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, path string) error {
	cfg, err := LoadConfig(path)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	app, err := NewApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	return app.Run(ctx)
}
