// Package secretfmt holds what the sinks (sink/tencentim and its fake,
// sink/webhook), the stores' DSN handling and outboxctl share to keep
// secrets out of formatted output and error texts, and the walk of an
// error chain that sink/sinktest checks for them.
package secretfmt

import (
	"fmt"
	"io"
	"slices"
)

// Mark stands in for a secret, or a part of a text that was cut out
// because it held one.
const Mark = "[redacted]"

// Format is the body of a fmt.Formatter for a value that holds a secret:
// whatever the verb and flags, it prints desc, a description the caller
// built without the secret, never the value's fields. %#v prints desc as
// is; every other verb formats desc as a string would be (%q quotes it,
// %x hex-encodes it, %d reports a bad verb), so no verb reaches the
// fields.
func Format(f fmt.State, verb rune, desc string) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, desc)
		return
	}
	_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), desc)
}

// Secret describes a secret's presence without its content: Mark, or
// "(empty)".
func Secret(s string) string {
	if s == "" {
		return "(empty)"
	}
	return Mark
}

// maxChain is how many errors of a chain AnyInChain looks at.
const maxChain = 100

// AnyInChain reports whether match holds for err or for any error it
// wraps, through Unwrap() error and Unwrap() []error. A chain of more
// than 100 errors counts as matching: too long to check, it is treated
// as holding a secret.
func AnyInChain(err error, match func(error) bool) bool {
	errs := Chain(err, maxChain)
	return len(errs) > maxChain || slices.ContainsFunc(errs, match)
}

// Chain returns err and every error it wraps, through Unwrap() error and
// Unwrap() []error (errors.Join trees), breadth first, leaving out nils.
// It stops after limit errors, and then returns limit+1, so that a
// caller can tell a chain too long to walk whole.
func Chain(err error, limit int) []error {
	var out []error
	queue := []error{err}
	for len(queue) > 0 && len(out) <= limit {
		e := queue[0]
		queue = queue[1:]
		if e == nil {
			continue
		}
		out = append(out, e)
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			queue = append(queue, u.Unwrap())
		case interface{ Unwrap() []error }:
			queue = append(queue, u.Unwrap()...)
		}
	}
	return out
}
