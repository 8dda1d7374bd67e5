package sinktest

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// TraceParent is the W3C trace context the suite's ordinary messages
// carry in their "traceparent" header.
const TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// Message is the suite's ordinary message n of key: a JSON payload, a
// type, and a trace context and request ID in its headers, each of
// plain printable ASCII. Every sink should deliver it unchanged.
func Message(id, key string, n int) outbox.Message {
	return outbox.Message{
		ID: id, Key: key, Type: "SinkTestEvent",
		Payload: fmt.Appendf(nil, `{"n":%d,"key":%q}`, n, key),
		Headers: map[string]string{outbox.HeaderTraceParent: TraceParent, "x-request-id": fmt.Sprintf("req-%d", n)},
	}
}

// message is the suite's ordinary message of a check: what names the
// check.
func (s *suite) message(what string, n int, key string) outbox.Message {
	return Message(s.id(what, n), key, n)
}

// HostileMessage is a message that is legal (outbox.Message.Validate
// accepts it, so a store hands it to the sink) but hard to carry.
type HostileMessage struct {
	// Name says what is hard about it.
	Name string
	Msg  outbox.Message
}

// HostileMessages returns the suite's hostile messages, with IDs that
// start with prefix: payloads that are not UTF-8, empty, of 1 and 4 MiB;
// IDs with CR, LF, NUL and '%', of 255 characters; types and keys with
// control characters, right-to-left overrides and emoji, an empty key;
// header values with CR LF (header injection), NUL, surrounding spaces,
// 64 KiB; header names with spaces, colons, CR LF, or differing only in
// case; 200 headers. A sink delivers each unchanged or refuses it as
// Permanent.
func HostileMessages(prefix string) []HostileMessage {
	base := func(n int) outbox.Message {
		m := Message(fmt.Sprintf("%s-%d", prefix, n), "hostile", n)
		m.Headers = nil
		return m
	}
	var out []HostileMessage
	add := func(name string, edit func(m *outbox.Message)) {
		m := base(len(out))
		edit(&m)
		out = append(out, HostileMessage{Name: name, Msg: m})
	}
	withHeaders := func(h map[string]string) func(m *outbox.Message) {
		return func(m *outbox.Message) { m.Headers = h }
	}
	add("payload not UTF-8, with NUL", func(m *outbox.Message) { m.Payload = []byte{0xff, 0xfe, 0, 'x', 0xc3, 0x28, '\r', '\n'} })
	add("empty payload", func(m *outbox.Message) { m.Payload = nil })
	add("payload of 1 MiB", func(m *outbox.Message) { m.Payload = []byte(strings.Repeat("p", 1<<20)) })
	add("payload of 4 MiB", func(m *outbox.Message) { m.Payload = []byte(strings.Repeat("q", 4<<20)) })
	add("ID with CR LF (header injection) and NUL", func(m *outbox.Message) { m.ID += "\r\nX-Injected: 1\x00" })
	add("ID with percent signs and spaces", func(m *outbox.Message) { m.ID += " %41%zz %" })
	add("ID of 255 characters, mostly emoji", func(m *outbox.Message) {
		m.ID += "-" + strings.Repeat("😀", outbox.MaxIDLength-1-utf8.RuneCountInString(m.ID))
	})
	add("type with tab, NUL and accents", func(m *outbox.Message) { m.Type = "T\t\x00é" })
	add("key with control characters", func(m *outbox.Message) { m.Key = "k\x00\x01\x1f\x7f" })
	add("key of 255 emoji", func(m *outbox.Message) { m.Key = strings.Repeat("😀", outbox.MaxKeyLength) })
	add("key with a right-to-left override", func(m *outbox.Message) { m.Key = "\u202eevil" })
	add("key with CR LF (header injection)", func(m *outbox.Message) { m.Key = "k\r\nX-Injected: 1" })
	add("empty key", func(m *outbox.Message) { m.Key = "" })
	add("header value with CR LF (header injection)", withHeaders(map[string]string{"x-note": "a\r\nX-Injected: 1"}))
	add("header value with NUL", withHeaders(map[string]string{"x-note": "a\x00b"}))
	add("header value with surrounding spaces", withHeaders(map[string]string{"x-note": " a b\t"}))
	add("empty header value", withHeaders(map[string]string{"x-empty": ""}))
	add("header value with accents and emoji", withHeaders(map[string]string{"x-name": "Zoë 😀"}))
	add("header value of 64 KiB", withHeaders(map[string]string{"x-big": strings.Repeat("v", 64<<10)}))
	add("header name with a space and a colon", withHeaders(map[string]string{"bad name:": "v"}))
	add("header name with CR LF", withHeaders(map[string]string{"x\r\nX-Injected": "1"}))
	add("header names differing only in case", withHeaders(map[string]string{"X-Twin": "1", "x-twin": "2"}))
	add("200 headers", func(m *outbox.Message) {
		m.Headers = map[string]string{}
		for i := range 200 {
			m.Headers[fmt.Sprintf("x-h%03d", i)] = fmt.Sprint(i)
		}
	})
	return out
}
