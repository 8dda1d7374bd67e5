package kafka

import (
	"fmt"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxrelay/outboxrelay/internal/headernames"
	"github.com/outboxrelay/outboxrelay/internal/sinkerr"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Headers the sink sets on every record, before the message's own.
const (
	// HeaderEventID carries Message.ID: what consumers deduplicate by.
	HeaderEventID = "outbox-event-id"
	// HeaderEventType carries Message.Type.
	HeaderEventType = "outbox-event-type"
)

// reservedPrefix starts the names of the sink's own headers.
const reservedPrefix = "outbox-event-"

// ReservedHeader reports whether name, in any case, starts with
// "outbox-event-": the sink's own headers (HeaderEventID,
// HeaderEventType and any it adds later). A stored header of such a name
// is not forwarded: Publish leaves it out with a debug log line and
// delivers the message under its own event ID and type, so that no
// stored header can make a consumer take it for another event. Kafka
// itself acts on no header, so no other name is reserved.
func ReservedHeader(name string) bool {
	return headernames.HasPrefixFold(name, reservedPrefix)
}

// reservedIn returns the names in headers that ReservedHeader refuses,
// sorted.
func reservedIn(headers map[string]string) []string {
	return headernames.Matching(headers, ReservedHeader)
}

// Topic returns the topic msg goes to, or the permanent error Publish
// would return for it: the mapping failed (its error is wrapped), or the
// name is not a valid topic (ErrUnsendable).
func (s *Sink) Topic(msg outbox.Message) (string, error) {
	if s.topicFor == nil {
		return s.topic, nil
	}
	topic, err := s.topicFor(msg)
	if err != nil {
		return "", outbox.Permanent(s.newError("topic mapping failed", msg.ID, "", err))
	}
	if why := topicFault(topic); why != "" {
		return "", s.unsendable(msg.ID, fmt.Sprintf("topic %s %s", sinkerr.Quote(topic), why))
	}
	return topic, nil
}

// Record returns the record that Publish produces for msg: its topic
// (see Topic); Message.Key as the key, which chooses the partition (no
// key, spread over the partitions, when Key is empty); the payload as
// the value; the headers HeaderEventID, HeaderEventType, then the
// message's own in name order, without the reserved ones
// (ReservedHeader). Or the permanent error Publish returns without
// sending anything: the topic mapping failed or gave an invalid name, a
// header name is not valid UTF-8 (consumers in other languages read
// header names as UTF-8 text), or the record is over MaxRecordBytes
// (ErrUnsendable). Keys, values and header values are bytes to Kafka
// and travel unchanged, whatever they hold.
//
// Producers may call it before Enqueue to refuse a message this sink
// could never deliver. It is safe for concurrent use and does not touch
// the brokers. Each call returns a new record.
func (s *Sink) Record(msg outbox.Message) (*kgo.Record, error) {
	topic, err := s.Topic(msg)
	if err != nil {
		return nil, err
	}
	rec := &kgo.Record{Topic: topic, Value: msg.Payload}
	if msg.Key != "" {
		rec.Key = []byte(msg.Key)
	}
	rec.Headers = make([]kgo.RecordHeader, 0, 2+len(msg.Headers))
	rec.Headers = append(rec.Headers,
		kgo.RecordHeader{Key: HeaderEventID, Value: []byte(msg.ID)},
		kgo.RecordHeader{Key: HeaderEventType, Value: []byte(msg.Type)})
	forwarded := func(name string) bool { return !ReservedHeader(name) }
	for _, name := range headernames.Matching(msg.Headers, forwarded) {
		if !utf8.ValidString(name) {
			return nil, s.unsendable(msg.ID, fmt.Sprintf("header name %s is not valid UTF-8", sinkerr.Quote(name)))
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: name, Value: []byte(msg.Headers[name])})
	}
	if n := RecordBytes(rec); n > s.maxRecordBytes {
		return nil, s.unsendable(msg.ID, fmt.Sprintf("record is %d bytes (key %d, value %d, %d headers), over MaxRecordBytes (%d)",
			n, len(rec.Key), len(rec.Value), len(rec.Headers), s.maxRecordBytes))
	}
	return rec, nil
}

// RecordBytes is the size that MaxRecordBytes bounds: rec encoded alone
// in a record batch, uncompressed (the 61-byte v2 batch header and the
// record with its length prefixes), plus the few bytes by which
// franz-go's own estimate can exceed it, so that a record within
// MaxRecordBytes always fits a batch of that size.
func RecordBytes(rec *kgo.Record) int {
	n := 1 + // attributes
		1 + // timestamp delta 0
		1 + // offset delta 0
		varintLen(len(rec.Key)) + len(rec.Key) +
		varintLen(len(rec.Value)) + len(rec.Value) +
		varintLen(len(rec.Headers))
	for _, h := range rec.Headers {
		n += varintLen(len(h.Key)) + len(h.Key) + varintLen(len(h.Value)) + len(h.Value)
	}
	return batchHeaderBytes + varintLen(n) + n + estimateSlackBytes
}

const (
	// batchHeaderBytes is the v2 record batch header, as the broker
	// counts it against max.message.bytes.
	batchHeaderBytes = 61
	// estimateSlackBytes covers what franz-go adds to a batch's size
	// beyond the broker's count (an array length and a length prefix of
	// the flexible produce versions).
	estimateSlackBytes = 8
)

// varintLen is the length of n as a zigzag varint, as Kafka encodes
// record lengths (n may be -1 for a missing key).
func varintLen(n int) int {
	u := uint64(n)<<1 ^ uint64(int64(n)>>63)
	l := 1
	for u >= 0x80 {
		u >>= 7
		l++
	}
	return l
}
