package svckit

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
)

// Exit codes of Main.
const (
	ExitFailed = 1
	ExitUsage  = 2
)

// Command is a service's command line: its name, the environment it
// reads (for the usage text) and what serving means.
type Command struct {
	// Name is the command's name, in the usage line and in front of its
	// errors, e.g. "roomservice".
	Name string
	// Env lists the variables that override the config file, by name
	// only: their values may be secrets and are never printed.
	Env []EnvVar
	// Flags, if set, adds the command's own flags. The function it
	// returns runs after parsing; when it reports done, the command ends
	// with code (room-service's -demo, which says where the demo is).
	Flags func(fs *flag.FlagSet) func(stderr io.Writer) (code int, done bool)
	// Serve runs the service until ctx ends (SIGINT or SIGTERM). path is
	// the -config flag ("" without it); logger writes JSON to stderr.
	Serve func(ctx context.Context, path string, logger *slog.Logger) error
}

// Main parses args (-config FILE, -h and the command's own flags), runs
// c.Serve until SIGINT or SIGTERM, and returns the exit code: 0, or
// ExitFailed when serving failed, or ExitUsage for a bad argument.
func Main(args []string, stderr io.Writer, c Command) int {
	flags := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	flags.SetOutput(stderr)
	configPath := flags.String("config", "", "path of the YAML config file; without it, the settings come from the environment alone")
	var after func(io.Writer) (int, bool)
	if c.Flags != nil {
		after = c.Flags(flags)
	}
	flags.Usage = func() { usage(stderr, flags, c) }
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return ExitUsage
	}
	if after != nil {
		if code, done := after(stderr); done {
			return code
		}
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q (flags: -config FILE)\n", c.Name, flags.Arg(0))
		return ExitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := c.Serve(ctx, *configPath, slog.New(slog.NewJSONHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(stderr, c.Name+":", err)
		if *configPath == "" {
			fmt.Fprintf(stderr, "%s: no -config: the settings came from the environment alone (see %s -h)\n", c.Name, c.Name)
		}
		return ExitFailed
	}
	return 0
}

// usage prints the flags and the environment variables, by name only:
// their values may be secrets.
func usage(w io.Writer, flags *flag.FlagSet, c Command) {
	fmt.Fprintf(w, "usage: %s [-config FILE]\n", c.Name)
	flags.PrintDefaults()
	fmt.Fprintln(w, "\nenvironment, overriding the file (a *_FILE variable names a file holding the value,")
	fmt.Fprintln(w, "such as a mounted secret; the plain variable wins when both are set):")
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	for _, s := range c.Env {
		names := s.Var
		if s.FileVar != "" {
			names += ", " + s.FileVar
		}
		fmt.Fprintf(tw, "  %s\t%s\n", names, s.Key)
	}
	_ = tw.Flush()
}

// Runner is a service's App: it serves until ctx ends, then stops in its
// drain order.
type Runner interface {
	Run(ctx context.Context) error
}

// Serve is a Command.Serve that loads the configuration from path, builds
// the App and runs it.
func Serve[C any, A Runner](load func(path string) (C, error), newApp func(context.Context, C, *slog.Logger) (A, error)) func(context.Context, string, *slog.Logger) error {
	return func(ctx context.Context, path string, logger *slog.Logger) error {
		cfg, err := load(path)
		if err != nil {
			return err
		}
		app, err := newApp(ctx, cfg, logger)
		if err != nil {
			return err
		}
		return app.Run(ctx)
	}
}
