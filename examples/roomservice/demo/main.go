// Command demo runs room-service end to end against a local fake of
// Tencent IM that fails the first publishes, narrates the seed's Done
// Definition and checks every step:
//
//	go run ./examples/roomservice/demo [-dsn DSN]
//
// It takes MySQL from -dsn or MYSQL_DSN; without either, the server at
// 127.0.0.1:3306 if it answers (as the quick start does), else a MySQL
// container where Docker runs, and otherwise an embedded engine. Its
// first line says which it took.
// The fake, the embedded engine and the container live here, so that the
// room-service binary (examples/roomservice) links none of them.
//
// With -fake-im it only serves the Tencent IM fake that a room-service
// config's tencent_im.base_url names, for running room-service locally:
//
//	go run ./examples/roomservice/demo -fake-im -config examples/roomservice/config.yaml
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/outboxrelay/outboxrelay/examples/internal/localmysql"
)

func main() {
	// A flag set of our own: the embedded engine's vitess dependency
	// registers flags on the global one.
	flags := flag.NewFlagSet("demo", flag.ExitOnError)
	// The default is named, not shown: -h and a mistyped flag print a
	// flag's default, and this one holds a password.
	dsn := flags.String("dsn", "", "MySQL server DSN (default $MYSQL_DSN, else "+localmysql.DefaultDSN+" if it answers, else a container or an embedded engine)")
	fakeIM := flags.Bool("fake-im", false, "serve only the Tencent IM fake named by -config's tencent_im block, until interrupted")
	configPath := flags.String("config", "", "with -fake-im: the room-service config file")
	_ = flags.Parse(os.Args[1:])
	*dsn = localmysql.Named(*dsn)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	if *fakeIM {
		err = serveFakeIM(ctx, *configPath, os.Stdout)
	} else {
		err = runDemo(ctx, os.Stdout, *dsn)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
