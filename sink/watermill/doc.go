// Package watermill is an outbox.Sink that publishes through any
// Watermill publisher (github.com/ThreeDotsLabs/watermill's
// message.Publisher): RabbitMQ through watermill-amqp, Redis Streams
// through watermill-redisstream, and every other broker Watermill
// supports (Kafka, Google Cloud Pub/Sub, SQS, NATS, SQL, …) is one
// adapter away. The package imports Watermill's core only; the service
// builds the publisher of its broker and hands it over in
// Config.Publisher.
//
// Each message becomes one Watermill message: its UUID is Message.ID,
// its payload Message.Payload, its metadata Message.Headers plus
// outbox-event-id, outbox-event-type and (for a non-empty key)
// outbox-event-key; a stored header whose name starts with
// "outbox-event-" or "_watermill_" (any case) is not forwarded (see
// ReservedPrefixes). The topic is Config.Topic, or Config.TopicFor's
// answer for the message. What the metadata and UUID become on the wire
// is the publisher's marshaler's business: watermill-amqp's default puts
// them in AMQP headers, watermill-redisstream's in the stream entry.
//
// Delivery is at-least-once. Publish returns nil only when the
// publisher returned nil, so the guarantee is the publisher's: build it
// so that Publish waits for the broker (watermill-amqp:
// Publish.ConfirmDelivery; watermill-redisstream waits for XADD's reply
// anyway). A Publish whose context ends first returns a retryable error
// and leaves the call in the publisher (bounded by MaxInFlight), whose
// message may still arrive: the worker's retry then sends it again.
// Consumers deduplicate by the Watermill UUID.
//
// Order: with the worker's Ordering, a key has one Publish in flight at
// a time, and a key's next message is published only after the broker
// took the one before; so a broker that keeps one destination's order (a
// RabbitMQ queue, a Redis stream) holds each key's first copies in
// enqueue order, provided the publisher waits for the broker (confirms).
// Whether a consumer sees that order is the consumer's set-up (one
// consumer per queue, or partitions by outbox-event-key).
//
// Error classes, for the worker's retry policy:
//
//   - permanent (outbox.Permanent), what the sink knows can never pass:
//     the message has no topic (ErrNoTopic: TopicFor failed, or answered
//     an empty, over-long or non-UTF-8 topic, or one with control
//     characters), a message Config.Check refuses (ErrUnsendable; see
//     CheckAMQP), and what Config.Classify calls Permanent;
//   - unavailable (outbox.Unavailable): what Config.Classify calls
//     Unavailable (a missing exchange or stream, refused rights);
//   - retryable: every other error of the publisher (the sink knows no
//     broker's errors, and retrying loses nothing), the context ended,
//     the sink closed, the publisher panicked.
//
// Every error text starts with the class of the failure, then the
// publisher's error, then the event ID and the topic:
//
//	watermill: publish failed: not connected to AMQP (event "e-1", topic "room-events")
//
// Config and Sink print and log without the publisher (whose
// configuration may hold the broker's password), and no error or log
// line holds a Config.Redact text.
package watermill
