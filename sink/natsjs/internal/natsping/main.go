// Command natsping exits 0 when the NATS server at the URL given answers
// with JetStream enabled; .ci/run waits on it.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: natsping NATS_URL")
		os.Exit(2)
	}
	nc, err := nats.Connect(os.Args[1], nats.Timeout(2*time.Second), nats.NoReconnect())
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsping:", err)
		os.Exit(1)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = js.AccountInfo(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsping: JetStream:", err)
		os.Exit(1)
	}
}
