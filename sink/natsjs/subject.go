package natsjs

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// MaxSubjectBytes bounds every subject the sink publishes to, from the
// default mapping or Config.Subject. A longer one fails its message
// permanently (ErrUnsendable) before anything is sent.
//
// Why a bound at all: the server reads the whole publish line (HPUB,
// subject, reply inbox, sizes) against its max_control_line, 4096 bytes
// by default, and answers a longer one by closing the connection, which
// nats.go does not reopen: one message would stop every delivery on it,
// again after every restart. Why 1024: it leaves 3 KB of that line for
// the reply inbox and the sizes, and for what consumers add to the
// subject on the way out (JetStream ack subjects of a few hundred bytes,
// $JS.API.DIRECT.GET prefixes, the subject transforms of sourced
// streams), while a Type and a Key of 255 characters each fit when they
// are mostly letters and digits.
const MaxSubjectBytes = 1024

// MaxPrefixBytes bounds Config.Prefix. With a prefix this long, a Type
// and a Key of up to 255 ASCII letters, digits, '-' and '_' each still
// fit in MaxSubjectBytes (each other byte takes 3: %XX).
const MaxPrefixBytes = 256

// Subject returns the subject msg is published to, or the permanent
// error Publish would return for it: the mapping failed (the error is
// wrapped, credentials redacted), or the subject is invalid or over
// MaxSubjectBytes (ErrUnsendable).
func (s *Sink) Subject(msg outbox.Message) (string, error) {
	subject, err := s.subject(msg)
	if err != nil {
		return "", outbox.Permanent(newPublishError("subject mapping failed", msg.ID, "", err))
	}
	if err := checkSubject(subject); err != nil {
		return "", unsendable(msg.ID, err.Error())
	}
	return subject, nil
}

func (s *Sink) defaultSubject(msg outbox.Message) (string, error) {
	return s.prefix + "." + Token(msg.Type) + "." + Token(msg.Key), nil
}

// Token makes s one subject token that no other string maps to: ASCII
// letters, digits, '-' and '_' stay, every other byte becomes %XX, and
// the empty string becomes "%".
func Token(s string) string {
	if s == "" {
		return "%"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// checkSubject accepts a literal publish subject within MaxSubjectBytes:
// valid UTF-8, dot-separated non-empty tokens, no spaces, control
// characters or wildcards ('*' and '>' anywhere).
func checkSubject(subject string) error {
	if len(subject) > MaxSubjectBytes {
		return fmt.Errorf("subject %s is %d bytes, over MaxSubjectBytes (%d)", quote(subject), len(subject), MaxSubjectBytes)
	}
	if why := subjectFault(subject); why != "" {
		return fmt.Errorf("subject %s is not a valid publish subject: %s", quote(subject), why)
	}
	return nil
}

func subjectFault(subject string) string {
	if !utf8.ValidString(subject) {
		return "not valid UTF-8"
	}
	for i := 0; i < len(subject); i++ {
		switch c := subject[i]; {
		case c <= ' ' || c == 0x7f:
			return fmt.Sprintf("space or control character 0x%02X at byte %d", c, i)
		case c == '*' || c == '>':
			return fmt.Sprintf("wildcard %q at byte %d", c, i)
		}
	}
	for _, t := range strings.Split(subject, ".") {
		if t == "" {
			return "empty token"
		}
	}
	return ""
}

// quote is s quoted for an error text, cut to 64 bytes: enough to
// recognise, and no 6 KB subject or header name in a stored last error.
func quote(s string) string {
	const n = 64
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return fmt.Sprintf("%q…", s[:i])
}
