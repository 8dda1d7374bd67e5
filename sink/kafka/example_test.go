package kafka_test

import (
	"context"
	"fmt"
	"log"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/kafka"
)

// A sink that produces room events to one topic, keyed by room, on a
// cluster of kfake (franz-go's in-process Kafka) in place of a real one.
func Example() {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "room-events"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	sink, err := kafka.New(kafka.Config{
		Seeds: c.ListenAddrs(), // e.g. []string{"kafka-1:9092", "kafka-2:9092"}
		Topic: "room-events",
		// TLS:  kafka.TLS{CAFile: "/etc/kafka/ca.pem"},
		// SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, Username: "room-service", Password: kafka.Secret(password)},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer sink.Close()

	msg := outbox.Message{ID: "e-1", Key: "room-42", Type: "RoomGiftSent", Payload: []byte(`{"gift":"rose"}`)}
	rec, err := sink.Record(msg) // what Publish sends, checked before Enqueue if you like
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("topic %s, key %s, headers %s=%s %s=%s\n", rec.Topic, rec.Key,
		rec.Headers[0].Key, rec.Headers[0].Value, rec.Headers[1].Key, rec.Headers[1].Value)

	// A worker calls Publish; here, once by hand.
	if err := sink.Publish(context.Background(), msg); err != nil {
		log.Fatal(err)
	}
	fmt.Println("published")

	_, err = kafka.New(kafka.Config{Seeds: c.ListenAddrs(), Topic: "room events"})
	fmt.Println(err)
	// Output:
	// topic room-events, key room-42, headers outbox-event-id=e-1 outbox-event-type=RoomGiftSent
	// published
	// kafka: Topic "room events": has ' ' at byte 4: topic names are ASCII letters, digits, '.', '_' and '-'
}
