// Command roomservice is a small live-room backend that shows the outbox
// end to end: room commands over HTTP change MySQL state and write their
// events in the same transaction, the events are published to Tencent
// Cloud IM right after commit, and a worker delivers whatever that could
// not.
//
//	go run ./examples/roomservice -config examples/roomservice/config.yaml
//
// This is the production command: it links no demo machinery. The
// narrated demo, its fallback databases and the Tencent IM fake are the
// demo command's (examples/roomservice/demo).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
)

func main() {
	flags := flag.NewFlagSet("roomservice", flag.ExitOnError)
	configPath := flags.String("config", "", "path of the YAML config file (required); the demo is go run ./examples/roomservice/demo")
	_ = flags.Parse(os.Args[1:])

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := fmt.Errorf("-config PATH is required (the demo is a command of its own: go run ./examples/roomservice/demo)")
	if *configPath != "" {
		err = serve(ctx, *configPath)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "roomservice:", err)
		os.Exit(1)
	}
}

func serve(ctx context.Context, path string) error {
	cfg, err := roomservice.LoadConfig(path)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	app, err := roomservice.NewApp(ctx, cfg, logger)
	if err != nil {
		return err
	}
	return app.Run(ctx)
}
