// Package safetext shows text that came from outside (a database, a
// message) to people without letting it act on their screen: control
// characters, bidirectional overrides and invalid UTF-8 are shown
// escaped. outboxctl uses it for the terminal, outboxui for the browser
// (where html/template escapes the markup on top).
package safetext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape makes s harmless to show: control characters (escape sequences
// among them), line and paragraph separators, bidirectional controls and
// invalid UTF-8 are written escaped (\u001b, \xff), newlines and tabs
// only when keepLines is false.
func Escape(s string, keepLines bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.In(r, unicode.Bidi_Control):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// Short is Escape(s, false) cut to n runes, with "…" at the end when cut.
func Short(s string, n int) string {
	s = Escape(s, false)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
