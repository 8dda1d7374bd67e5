package natsjs

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxrelay/outboxrelay/internal/headernames"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// MaxHeaderBytes bounds a message's encoded header block: the NATS/1.0
// line, every "Name: value" line (the message's own headers and the
// sink's: Nats-Msg-Id, Outbox-Event-Type, Outbox-Event-Key,
// Nats-Expected-Stream) and the closing blank line. A larger block fails
// its message permanently (ErrUnsendable).
//
// JetStream refuses header blocks over 64 KiB (error 10097), or (2.9
// servers) sometimes stores them anyway; half of that leaves room for the
// headers that mirrors, sources and republish add to each copy, and is
// far more than trace context needs. The server's max_payload bounds
// headers and payload together as well.
const MaxHeaderBytes = 32 << 10

// ReservedHeader reports whether name, in any case, is a header that the
// sink does not forward from Message.Headers: one that starts with
// "Nats-" (JetStream acts on these: Nats-Rollup purges, Nats-Expected-*
// make the publish conditional, Nats-Msg-Id and Nats-TTL change
// deduplication and retention) or with "Outbox-Event-" (the sink sets
// its own). Publish leaves them out with a debug log line, and the
// message is delivered without them.
func ReservedHeader(name string) bool {
	return headernames.HasPrefixFold(name, "Nats-") || headernames.HasPrefixFold(name, "Outbox-Event-")
}

// reservedIn returns the names in headers that ReservedHeader refuses,
// sorted.
func reservedIn(headers map[string]string) []string {
	return headernames.Matching(headers, ReservedHeader)
}

// headers is the header set of msg as it is sent, or the permanent error
// for the first header (by name) that cannot be sent as stored.
func (s *Sink) headers(msg outbox.Message) (nats.Header, error) {
	h := make(nats.Header, len(msg.Headers)+4)
	forwarded := func(name string) bool { return !ReservedHeader(name) }
	for _, name := range headernames.Matching(msg.Headers, forwarded) {
		if why := nameFault(name); why != "" {
			return nil, unsendable(msg.ID, fmt.Sprintf("header %s: name %s", quote(name), why))
		}
		if err := setHeader(h, msg.ID, name, msg.Headers[name]); err != nil {
			return nil, err
		}
	}
	own := [][2]string{{jetstream.MsgIDHeader, msg.ID}, {HeaderEventType, msg.Type}}
	if msg.Key != "" {
		own = append(own, [2]string{HeaderEventKey, msg.Key})
	}
	if s.expectStream != "" {
		own = append(own, [2]string{jetstream.ExpectedStreamHeader, s.expectStream})
	}
	for _, kv := range own {
		if err := setHeader(h, msg.ID, kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	if err := checkShadows(h); err != nil {
		return nil, unsendable(msg.ID, err.Error())
	}
	if n := headerBytes(h); n > MaxHeaderBytes {
		return nil, unsendable(msg.ID, fmt.Sprintf("header block is %d bytes, over MaxHeaderBytes (%d)", n, MaxHeaderBytes))
	}
	return h, nil
}

func setHeader(h nats.Header, id, name, value string) error {
	if why := valueFault(value); why != "" {
		// Never the value itself: it may carry a credential.
		return unsendable(id, fmt.Sprintf("header %s: value %s", quote(name), why))
	}
	h[name] = []string{value}
	return nil
}

// nameFault says why NATS cannot carry name as a header name, or "".
// The rule is nats.go's: printable ASCII except `"(),/:;<=>?@[\]{}`.
func nameFault(name string) string {
	if name == "" {
		return "is empty"
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return fmt.Sprintf("has byte 0x%02X at %d: names are printable ASCII without spaces or any of \"(),/:;<=>?@[\\]{}", c, i)
		}
	}
	return ""
}

// valueFault says why NATS cannot carry value unchanged, or "". nats.go
// replaces CR and LF with spaces and strips surrounding spaces and tabs;
// other control characters (NUL ends a string in C clients) and invalid
// UTF-8 do not survive every client.
func valueFault(value string) string {
	if !utf8.ValidString(value) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(value); i++ {
		switch c := value[i]; {
		case c == '\r' || c == '\n':
			return fmt.Sprintf("has a line break (0x%02X) at byte %d", c, i)
		case c < ' ' && c != '\t' || c == 0x7f:
			return fmt.Sprintf("has control character 0x%02X at byte %d", c, i)
		}
	}
	if value != strings.Trim(value, " \t") {
		return "begins or ends with a space or tab, which NATS strips"
	}
	return ""
}

// checkShadows refuses a header block in which the name of a header that
// JetStream reads (Nats-Msg-Id, Nats-Expected-Stream) occurs outside that
// header's own line: the 2.9 servers read a header by the first
// occurrence of its name in the block, so the real one would be missed,
// and with it the deduplication or the stream check.
func checkShadows(h nats.Header) error {
	for _, key := range []string{jetstream.MsgIDHeader, jetstream.ExpectedStreamHeader} {
		if _, ok := h[key]; !ok {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(h)) {
			if name == key {
				continue
			}
			if strings.Contains(name, key) || strings.Contains(h[name][0], key) {
				return fmt.Errorf("header %s contains %q, which JetStream can take for the %s header itself", quote(name), key, key)
			}
		}
	}
	return nil
}

// headerBytes is the size of h encoded as nats.go sends it.
func headerBytes(h nats.Header) int {
	n := len("NATS/1.0\r\n") + len("\r\n")
	for name, values := range h {
		for _, v := range values {
			n += len(name) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}
