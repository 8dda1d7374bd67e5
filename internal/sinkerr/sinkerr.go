// Package sinkerr holds what the broker sinks (sink/kafka,
// sink/watermill) share in the errors their Publish returns: the class
// of a failure, the layout of the texts, the error that carries such a
// text, and the quoting of names in it. The sinks scrub their secrets from a text before it gets
// here.
package sinkerr

import "fmt"

// Layout lays out the texts of one sink's errors about one event.
type Layout struct {
	// Prefix starts every text: the sink's package name ("kafka").
	Prefix string
	// Dest is what the sink calls a destination ("topic").
	Dest string
	// Quote quotes the event ID and the destination.
	Quote func(string) string
}

// Text is the text of an error about the event id: the class of the
// failure first, then what explains it (detail, often the underlying
// error's text; none when ""), then the event ID and the destination
// (when not ""), quoted:
//
//	<prefix>: <class>: <detail> (event "<id>", <dest> "<dest>")
//
// The outbox stores the text as the record's last error, cut at 512
// bytes, and operators read it cut at a column's width: the class comes
// first so that it survives the cut.
func (l Layout) Text(class, detail, id, dest string) string {
	text := l.Prefix + ": " + class
	if detail != "" {
		text += ": " + detail
	}
	if dest != "" {
		return text + fmt.Sprintf(" (event %s, %s %s)", l.Quote(id), l.Dest, l.Quote(dest))
	}
	return text + fmt.Sprintf(" (event %s)", l.Quote(id))
}

// Error is a sink's error about one event: a text made safe to store and
// log, the sink's sentinel that errors.Is finds in it (nil for none),
// and its cause, which errors.Is and errors.As reach through Unwrap (nil
// for none).
type Error struct {
	Text     string
	Sentinel error
	Cause    error
}

func (e *Error) Error() string { return e.Text }

// Is reports whether target is e's sentinel.
func (e *Error) Is(target error) bool { return e.Sentinel != nil && target == e.Sentinel }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

// Quote is s quoted for an error text (invalid UTF-8 and control
// characters escaped), cut to its first 64 bytes: enough to recognise,
// and no 6 KB name in a stored last error.
func Quote(s string) string {
	if len(s) > 64 {
		return fmt.Sprintf("%q…", s[:64])
	}
	return fmt.Sprintf("%q", s)
}
