package webhook

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// MaxHeaderBytes bounds the headers of a request, the sink's own and the
// message's ("Name: value\r\n" each). A message whose headers would be
// larger fails permanently (ErrUnsendable) before anything is sent:
// servers refuse large header blocks in ways that look transient (nginx
// answers 400 or 431 beyond 8 KiB a line, some proxies reset the
// connection), and such a message would never pass.
const MaxHeaderBytes = 16 << 10

// ErrUnsendable is wrapped by the permanent error Publish returns for a
// message that HTTP cannot carry as it is stored: a header name that is
// not an HTTP token, a header value with a control character (CR and LF
// among them: no header injection) or with spaces or tabs at either end
// (HTTP strips them), two header names that differ only in case, headers
// over MaxHeaderBytes, or a payload over Config.MaxPayloadBytes. Nothing
// of such a message is sent.
var ErrUnsendable = errors.New("webhook: message cannot be sent as stored")

// ReservedHeader reports whether name, in any case, is a header the sink
// does not take from Message.Headers: those it sets itself (Webhook-*,
// Outbox-Event-*, Content-Type, User-Agent and the Config.Headers), and
// those that belong to the transport (Host, Content-Length,
// Transfer-Encoding, Connection, Keep-Alive, TE, Trailer, Upgrade,
// Expect, Proxy-*). Publish leaves them out with a debug log line, and
// the message is delivered without them.
func ReservedHeader(name string) bool {
	lower := strings.ToLower(name)
	for _, prefix := range []string{"webhook-", "outbox-event-", "proxy-"} {
		if strings.HasPrefix(lower, prefix) {
			return true
		}
	}
	switch lower {
	case "content-type", "user-agent", "host", "content-length", "transfer-encoding", "connection",
		"keep-alive", "te", "trailer", "upgrade", "expect":
		return true
	}
	return false
}

// EncodeHeaderValue is how the sink writes the message ID, type and key
// into headers (HeaderID, HeaderEventType, HeaderEventKey), which HTTP
// cannot carry byte for byte: every byte outside printable ASCII
// (0x21–0x7E), and '%' itself, becomes %XX. An ID of letters, digits and
// punctuation other than '%' goes as it is. DecodeHeaderValue reverses
// it.
func EncodeHeaderValue(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if needsEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if needsEscape(c) {
			b = append(b, '%', hex[c>>4], hex[c&15])
		} else {
			b = append(b, c)
		}
	}
	return string(b)
}

func needsEscape(c byte) bool { return c <= ' ' || c >= 0x7f || c == '%' }

// DecodeHeaderValue returns the string EncodeHeaderValue encoded as v,
// for receivers: the message ID, type or key as the producer wrote it.
func DecodeHeaderValue(v string) (string, error) {
	s, err := url.PathUnescape(v)
	if err != nil {
		return "", fmt.Errorf("webhook: header value is not one EncodeHeaderValue wrote: %w", err)
	}
	return s, nil
}

// nameFault and valueFault say why HTTP cannot carry a header name or
// value unchanged, or "".
func nameFault(name string) string {
	if name == "" {
		return "is empty"
	}
	for i := 0; i < len(name); i++ {
		if !isTokenByte(name[i]) {
			return fmt.Sprintf("has byte 0x%02X at %d: a name is an HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", name[i], i)
		}
	}
	return ""
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func valueFault(value string) string {
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Sprintf("has control character 0x%02X at byte %d", c, i)
		}
	}
	if value != strings.Trim(value, " \t") {
		return "begins or ends with a space or tab, which HTTP strips"
	}
	return ""
}

// messageHeaders sets msg's own headers, leaving out the reserved ones
// (returned, sorted), or returns the permanent error for the first (by
// name) that HTTP cannot carry.
func (s *Sink) messageHeaders(set func(name, value string), msg outbox.Message) (dropped []string, err error) {
	names := make([]string, 0, len(msg.Headers))
	for name := range msg.Headers {
		if ReservedHeader(name) || s.static.has(name) {
			dropped = append(dropped, name)
			continue
		}
		names = append(names, name)
	}
	slices.Sort(names)
	slices.Sort(dropped)
	folded := make(map[string]string, len(names))
	for _, name := range names {
		if why := nameFault(name); why != "" {
			return nil, unsendable(msg.ID, fmt.Sprintf("header %s: name %s", quote(name), why))
		}
		if why := valueFault(msg.Headers[name]); why != "" {
			// Never the value itself: it may carry a credential.
			return nil, unsendable(msg.ID, fmt.Sprintf("header %s: value %s", quote(name), why))
		}
		lower := strings.ToLower(name)
		if twin, ok := folded[lower]; ok {
			return nil, unsendable(msg.ID, fmt.Sprintf("headers %s and %s differ only in case, and HTTP takes them for one", quote(twin), quote(name)))
		}
		folded[lower] = name
		set(name, msg.Headers[name])
	}
	return dropped, nil
}

// headerBytes is the size of h as "Name: value\r\n" lines.
func headerBytes(h http.Header) int {
	n := 0
	for name, values := range h {
		for _, v := range values {
			n += len(name) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// staticHeaders are Config.Headers, canonicalized: sent with every
// request; their values are secrets.
type staticHeaders map[string]string

func (h staticHeaders) has(name string) bool {
	_, ok := h[http.CanonicalHeaderKey(name)]
	return ok
}
