// Command roomservice is a small live-room backend that shows the outbox
// end to end: room commands over HTTP change MySQL state and write their
// events in the same transaction, the events are published to Tencent
// Cloud IM right after commit, and a worker delivers whatever that could
// not.
//
//	go run ./examples/roomservice -config examples/roomservice/config.yaml
//
// The environment overrides the file (MYSQL_DSN, MYSQL_DSN_FILE,
// TENCENT_IM_SECRET_KEY, … ; see -h), and without -config it is the
// whole configuration, so that an image needs no config file.
//
// This is the production command: it links no demo machinery. The
// narrated demo, its fallback databases and the Tencent IM fake are the
// demo command's (examples/roomservice/demo).
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

	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
)

// Exit codes.
const (
	exitFailed = 1
	exitUsage  = 2
)

// demoHint answers -demo: the demo is a command of its own, so that this
// binary links no fake and no embedded database.
const demoHint = "roomservice: the demo is a command of its own: go run ./examples/roomservice/demo"

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main with its arguments, error stream and exit code.
func run(args []string, stderr io.Writer) int {
	flags := flag.NewFlagSet("roomservice", flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "path of the YAML config file; without it, the settings come from the environment alone")
	demo := flags.Bool("demo", false, "print how to run the demo, which is a command of its own, and exit")
	flags.Usage = func() { usage(stderr, flags) }
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsage
	}
	if *demo {
		fmt.Fprintln(stderr, demoHint)
		return exitUsage
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "roomservice: unexpected argument %q (flags: -config FILE)\n", flags.Arg(0))
		return exitUsage
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, *configPath); err != nil {
		fmt.Fprintln(stderr, "roomservice:", err)
		if *configPath == "" {
			fmt.Fprintln(stderr, "roomservice: no -config: the settings came from the environment alone (see roomservice -h)")
		}
		return exitFailed
	}
	return 0
}

// usage prints the flags and the environment variables, by name only:
// their values may be secrets.
func usage(w io.Writer, flags *flag.FlagSet) {
	fmt.Fprintln(w, "usage: roomservice [-config FILE]")
	flags.PrintDefaults()
	fmt.Fprintln(w, "\nenvironment, overriding the file (a *_FILE variable names a file holding the value,")
	fmt.Fprintln(w, "such as a mounted secret; the plain variable wins when both are set):")
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for _, s := range roomservice.EnvSettings {
		names := s.Var
		if s.FileVar != "" {
			names += ", " + s.FileVar
		}
		fmt.Fprintf(tw, "  %s\t%s\n", names, s.Key)
	}
	_ = tw.Flush()
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
