// Package kafka is an outbox.Sink that produces messages to Apache
// Kafka through franz-go (github.com/twmb/franz-go/pkg/kgo): the path
// for when many services need the events and read them with consumer
// groups of their own.
//
// Each message becomes one record: Message.Key is the record key, which
// chooses the partition (franz-go's default partitioner hashes it with
// murmur2, as the Java client does, so a key always maps to the same
// partition while the topic keeps its partition count); an empty Key is
// no key, and such records spread over the partitions. The payload is
// the value. The event ID and type travel as the headers
// outbox-event-id and outbox-event-type, then the message's own headers
// in name order; a stored header whose name starts with
// "outbox-event-" (any case) is not forwarded (see ReservedHeader).
// The topic is Config.Topic, or Config.TopicFor's answer for the
// message.
//
// Publish waits for the brokers' acknowledgement of its own record
// (acks=all), bounded by its context. The sink's client is idempotent,
// so a record that franz-go retries is written once, and the records of
// one partition are written in the order produced. With the worker's
// Ordering, a key has one record in flight at a time, so each key's
// events are in the topic in enqueue order. Delivery is at-least-once:
// a Publish whose context ends before the acknowledgement may still see
// its record written, and the worker's next attempt writes it again.
// Consumers deduplicate by the outbox-event-id header.
//
// Batching: the sink's client does not linger. A record goes out as
// soon as the connection to its partition's leader is free; the records
// that the worker's other goroutines (WorkerOptions.Concurrency) produce
// meanwhile go together in the next request. So Concurrency 1 adds no
// wait, and higher concurrency fills batches.
//
// Error classes, for the worker's retry policy:
//
//   - permanent (outbox.Permanent), the message's own fault: the
//     ErrUnsendable cases (a topic name that is not valid, a header
//     name that is not UTF-8, a record over MaxRecordBytes), checked
//     before anything is sent; the topic mapping fails; the broker
//     refuses the record alone as too large (MESSAGE_TOO_LARGE,
//     RECORD_LIST_TOO_LARGE), invalid (INVALID_RECORD) or corrupt
//     (CORRUPT_MESSAGE). A broker refuses a whole batch for one record,
//     and franz-go fails every record then buffered for the partition,
//     so the sink sends such a record again alone before it calls the
//     error permanent (see Publish).
//   - unavailable (outbox.Unavailable), the set-up's fault, which an
//     operator fixes and which must not dead-letter the backlog: the
//     topic does not exist (UNKNOWN_TOPIC_OR_PARTITION, after franz-go's
//     four metadata retries of about a second, with auto-creation off),
//     not authorized for the topic or the cluster
//     (TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED), SASL
//     authentication failed, a broker's certificate does not verify.
//     The worker retries these whatever its policy, holds the sink off
//     and alerts.
//   - retryable: the partition's leader moved or is being elected, the
//     broker timed out or is not available, not enough in-sync
//     replicas, connection errors, an expired or cancelled context, the
//     client closed, and any code not named above. franz-go retries
//     most of these itself until the context ends.
//
// Every error text starts with the class of the failure, then the
// underlying error, then the event ID and topic, so that a last error
// cut at a column's width still shows what went wrong:
//
//	kafka: the topic does not exist: UNKNOWN_TOPIC_OR_PARTITION: This server does not host this topic-partition. (event "e-1", topic "room-events")
//
// The sink never logs or returns the SASL password (see Secret): Config
// and Sink print, log and marshal without it, and an error whose chain
// holds it is scrubbed.
package kafka
