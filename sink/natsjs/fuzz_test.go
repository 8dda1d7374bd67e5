package natsjs_test

import (
	"errors"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

// FuzzSubjectAndHeaders: for any message, Msg either refuses it with a
// permanent ErrUnsendable naming the event, or returns a subject and a
// header set that NATS carries unchanged: the subject within
// MaxSubjectBytes, literal, and decoding back to the Type and Key (so
// distinct pairs never share one); no reserved header from the message;
// every header encodes and decodes to itself; no header text that the
// server could take for Nats-Msg-Id or Nats-Expected-Stream.
func FuzzSubjectAndHeaders(f *testing.F) {
	emoji := strings.Repeat("😀", outbox.MaxTypeLength)
	for _, s := range [][5]string{
		{"e-1", "RoomGiftSent", "room-1", "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"e-2", emoji, emoji, "X", "😀"},
		{strings.Repeat("i", outbox.MaxIDLength), strings.Repeat("t", outbox.MaxTypeLength), strings.Repeat("k", outbox.MaxKeyLength), "X", "v"},
		{"e-3", "a.b", "*", "X-Dots", "a.b.>"},
		{"e-4", ">", " ", "X Y", "v"},
		{"e-5", "", "", "", ""},
		{"e-6", "a\tb", "x\x00y", "X-Ctl", "a\x01b"},
		{"e-7\r\n", "T\n", "K\r", "X\r\nY", "a\r\nNats-Rollup: all"},
		{"e-8", "T", "%", "Nats-Rollup", "all"},
		{"e-9", "T", "%25", "nats-msg-id", "e-1"},
		{"e-10", "T", "k", "Outbox-Event-Type", "Spoofed"},
		{"e-11", "T", "k", "X-Nats-Msg-Id", "1"},
		{"e-12", "Nats-Msg-Id", "k", "X-Was", "Nats-Expected-Stream"},
		{"e-13", "T", "k", "X-Space", " padded "},
		{"e-14", "T", "k", "Schlüssel", "\xff"},
		{"e-15", "T", "k", "X:Y", "v"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	sink := offlineSink(f, natsjs.Config{Prefix: "outbox", ExpectStream: "EVENTS"})
	f.Fuzz(func(t *testing.T, id, typ, key, name, value string) {
		msg := outbox.Message{ID: id, Type: typ, Key: key, Headers: map[string]string{name: value}}
		if msg.Validate() != nil {
			return // the store never holds it
		}
		m, err := sink.Msg(msg)
		if err != nil {
			if !outbox.IsPermanent(err) || !errors.Is(err, natsjs.ErrUnsendable) {
				t.Fatalf("not a permanent ErrUnsendable: %v", err)
			}
			if !strings.Contains(err.Error(), strconv.Quote(id)) {
				t.Fatalf("does not name the event: %v", err)
			}
			return
		}
		checkSubject(t, m.Subject, typ, key)
		checkHeaders(t, m.Header, msg)
	})
}

// FuzzCustomSubject: whatever Config.Subject returns is published as it
// is or refused as ErrUnsendable, never sent invalid.
func FuzzCustomSubject(f *testing.F) {
	for _, s := range []string{"a.b", "a..b", "a.*", "a.>", "a b", "a.\x00", "a.\x7f", "\xff", "", ".", "a.😀",
		"a." + strings.Repeat("b", natsjs.MaxSubjectBytes-2), "a." + strings.Repeat("b", natsjs.MaxSubjectBytes)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		sink := offlineSink(t, natsjs.Config{Subject: func(outbox.Message) (string, error) { return subject, nil }})
		m, err := sink.Msg(outbox.Message{ID: "e-1", Type: "T"})
		if err != nil {
			if !outbox.IsPermanent(err) || !errors.Is(err, natsjs.ErrUnsendable) {
				t.Fatalf("not a permanent ErrUnsendable: %v", err)
			}
			return
		}
		if m.Subject != subject {
			t.Fatalf("subject %q became %q", subject, m.Subject)
		}
		checkLiteral(t, subject)
	})
}

func checkSubject(t *testing.T, subject, typ, key string) {
	t.Helper()
	checkLiteral(t, subject)
	tokens := strings.Split(subject, ".")
	if len(tokens) != 3 || tokens[0] != "outbox" {
		t.Fatalf("subject %q is not outbox.<type>.<key>", subject)
	}
	if got, ok := untoken(tokens[1]); !ok || got != typ {
		t.Fatalf("type %q maps to %q, which decodes to %q", typ, tokens[1], got)
	}
	if got, ok := untoken(tokens[2]); !ok || got != key {
		t.Fatalf("key %q maps to %q, which decodes to %q", key, tokens[2], got)
	}
}

// checkLiteral: within the bound, UTF-8, non-empty tokens, no spaces,
// control characters or wildcards.
func checkLiteral(t *testing.T, subject string) {
	t.Helper()
	if len(subject) > natsjs.MaxSubjectBytes || !utf8.ValidString(subject) {
		t.Fatalf("subject of %d bytes, or not UTF-8: %q", len(subject), subject)
	}
	if strings.ContainsFunc(subject, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '*' || r == '>' }) {
		t.Fatalf("subject %q has a space, control character or wildcard", subject)
	}
	if slices.Contains(strings.Split(subject, "."), "") {
		t.Fatalf("subject %q has an empty token", subject)
	}
}

// untoken inverts natsjs.Token; a string Token cannot produce fails.
func untoken(tok string) (string, bool) {
	if tok == "%" {
		return "", true
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] != '%' {
			b.WriteByte(tok[i])
			continue
		}
		if i+2 >= len(tok) {
			return "", false
		}
		n, err := strconv.ParseUint(tok[i+1:i+3], 16, 8)
		if err != nil || strings.ToUpper(tok[i+1:i+3]) != tok[i+1:i+3] {
			return "", false
		}
		b.WriteByte(byte(n))
		i += 2
	}
	return b.String(), natsjs.Token(b.String()) == tok
}

func checkHeaders(t *testing.T, h nats.Header, msg outbox.Message) {
	t.Helper()
	want := map[string]string{jetstream.MsgIDHeader: msg.ID, natsjs.HeaderEventType: msg.Type, jetstream.ExpectedStreamHeader: "EVENTS"}
	if msg.Key != "" {
		want[natsjs.HeaderEventKey] = msg.Key
	}
	for name, value := range msg.Headers {
		if !natsjs.ReservedHeader(name) {
			want[name] = value
		}
	}
	block := "NATS/1.0\r\n"
	for name, values := range h {
		if len(values) != 1 || values[0] != want[name] {
			t.Fatalf("header %q is %q, want %q", name, values, want[name])
		}
		if !utf8.ValidString(name+values[0]) || strings.ContainsFunc(name+values[0], func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			t.Fatalf("header %q: %q has a line break, control character or invalid UTF-8", name, values[0])
		}
		// As nats.go writes a value: trimmed, CR and LF made spaces.
		block += name + ": " + strings.NewReplacer("\r", " ", "\n", " ").Replace(textproto.TrimString(values[0])) + "\r\n"
		for _, key := range []string{jetstream.MsgIDHeader, jetstream.ExpectedStreamHeader} {
			if name != key && (strings.Contains(name, key) || strings.Contains(values[0], key)) {
				t.Fatalf("header %q: %q can hide %s", name, values[0], key)
			}
		}
	}
	if len(h) != len(want) {
		t.Fatalf("headers %q, want %q", h, want)
	}
	block += "\r\n"
	if len(block) > natsjs.MaxHeaderBytes {
		t.Fatalf("header block of %d bytes", len(block))
	}
	decoded, err := nats.DecodeHeadersMsg([]byte(block))
	if err != nil || len(decoded) != len(h) {
		t.Fatalf("header block %q decodes to %q, %v", block, decoded, err)
	}
	for name, values := range h {
		if !slices.Equal(decoded[name], values) {
			t.Fatalf("header %q: sent %q, decodes to %q", name, values, decoded[name])
		}
	}
}
