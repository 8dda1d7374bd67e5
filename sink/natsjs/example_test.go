package natsjs_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// A named consumer of room-service's outbox that forwards every room
// event to JetStream, where any number of services read it with their own
// durable consumers.
func Example() {
	ctx := context.Background()
	db, err := sql.Open("mysql", "roomservice:secret@tcp(127.0.0.1:3306)/roomservice?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	store, err := mysql.New(db, mysql.Options{Table: "room_outbox"})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.AddConsumer(ctx, "broker", mysql.StartNow); err != nil && !errors.Is(err, mysql.ErrConsumerExists) {
		log.Fatal(err)
	}
	broker, err := store.Consumer("broker")
	if err != nil {
		log.Fatal(err)
	}

	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	// The duplicate window must outlast the longest redelivery delay.
	if _, err := js.CreateOrUpdateStream(ctx, natsjs.StreamConfig("ROOM_EVENTS", "room", 10*time.Minute)); err != nil {
		log.Fatal(err)
	}
	sink, err := natsjs.New(natsjs.Config{JetStream: js, Prefix: "room", ExpectStream: "ROOM_EVENTS"})
	if err != nil {
		log.Fatal(err)
	}
	worker, err := outbox.NewWorker(broker, sink, outbox.WorkerOptions{Name: "room_outbox_broker", Ordering: true})
	if err != nil {
		log.Fatal(err)
	}
	_ = worker.Run(ctx) // until ctx is cancelled
}
