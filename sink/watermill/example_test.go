package watermill_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/outboxrelay/outboxrelay/outbox"
	wmsink "github.com/outboxrelay/outboxrelay/sink/watermill"
)

// A sink on Watermill's in-process Go channel pub/sub, in place of a
// broker's publisher (amqp.NewPublisher, redisstream.NewPublisher, …),
// and a Watermill subscriber that reads the event back.
func Example() {
	pubSub := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	defer pubSub.Close()
	received, err := pubSub.Subscribe(context.Background(), "room-events")
	if err != nil {
		log.Fatal(err)
	}

	sink, err := wmsink.New(wmsink.Config{
		Publisher: pubSub,
		Topic:     "room-events",
		// Check:    wmsink.CheckAMQP,   // with watermill-amqp
		// Classify: classifyRedis,      // a service's knowledge of its broker's errors
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()

	// A worker calls Publish; here, once by hand.
	msg := outbox.Message{ID: "e-1", Key: "room-42", Type: "RoomGiftSent", Payload: []byte(`{"gift":"rose"}`),
		Headers: map[string]string{"x-request-id": "req-7"}}
	if err := sink.Publish(context.Background(), msg); err != nil {
		log.Fatal(err)
	}
	m := <-received
	m.Ack()
	fmt.Println(m.UUID, string(m.Payload))
	fmt.Println(m.Metadata.Get("outbox-event-type"), m.Metadata.Get("outbox-event-key"), m.Metadata.Get("x-request-id"))

	_, err = wmsink.New(wmsink.Config{Publisher: pubSub})
	fmt.Println(err)
	// Output:
	// e-1 {"gift":"rose"}
	// RoomGiftSent room-42 req-7
	// watermill: Topic: required unless TopicFor is set
}
