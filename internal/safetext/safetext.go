// Package safetext shows text that came from outside (a database, a
// message) to people without letting it act on their screen: control
// characters, bidirectional overrides and invalid UTF-8 are shown
// escaped. outboxctl uses it for the terminal, outboxui for the browser
// (where html/template escapes the markup on top). Truncate cuts a text
// to a byte budget as valid UTF-8, for error texts that are stored.
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

// Truncate returns s as valid UTF-8 of at most maxBytes bytes: every run
// of bytes that is not valid UTF-8 becomes U+FFFD, and a longer text is
// cut at a character boundary and ends in "…". Control characters are
// kept. Its work is bounded by maxBytes, not by the length of s. (The
// stores' last_error is cut with it, through backend.Truncate; sinks and
// the inbox cut their texts the same way.)
func Truncate(s string, maxBytes int) string {
	if maxBytes <= 0 {
		return ""
	}
	cut := false
	if limit := 4*maxBytes + utf8.UTFMax; len(s) > limit {
		s, cut = s[:limit], true
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxBytes && !cut {
		return s
	}
	const ellipsis = "…"
	if maxBytes <= len(ellipsis) {
		return cutRunes(s, maxBytes)
	}
	return cutRunes(s, maxBytes-len(ellipsis)) + ellipsis
}

// cutRunes returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 character.
func cutRunes(s string, n int) string {
	if n >= len(s) {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
