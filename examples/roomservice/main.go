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
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
)

// demoHint answers -demo: the demo is a command of its own, so that this
// binary links no fake and no embedded database.
const demoHint = "roomservice: the demo is a command of its own: go run ./examples/roomservice/demo"

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run is main with its arguments, error stream and exit code.
func run(args []string, stderr io.Writer) int {
	return svckit.Main(args, stderr, svckit.Command{
		Name:  "roomservice",
		Env:   svckit.EnvVars(roomservice.EnvSettings),
		Flags: demoFlag,
		Serve: svckit.Serve(roomservice.LoadConfig, roomservice.NewApp),
	})
}

// demoFlag adds -demo, which prints where the demo is and exits 2.
func demoFlag(flags *flag.FlagSet) func(io.Writer) (int, bool) {
	demo := flags.Bool("demo", false, "print how to run the demo, which is a command of its own, and exit")
	return func(stderr io.Writer) (int, bool) {
		if *demo {
			fmt.Fprintln(stderr, demoHint)
		}
		return svckit.ExitUsage, *demo
	}
}
