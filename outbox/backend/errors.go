package backend

import (
	"errors"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
)

// Sentinel errors. Test for them with errors.Is; the errors returned wrap
// them with detail.
var (
	// ErrNotFound is returned by Store.Get when no message has the ID.
	ErrNotFound = errors.New("outbox: message not found")
	// ErrDuplicateID is returned by Store.Enqueue when a message ID is
	// already stored, or appears twice in one call. Nothing of that call is
	// written.
	ErrDuplicateID = errors.New("outbox: duplicate message ID")
	// ErrInvalidMessage is returned by Message.Validate and Store.Enqueue
	// for a message a store cannot keep as it is: an empty or over-long
	// ID, Type or Key, text that is not valid UTF-8, or a payload or
	// headers over the store's size limits. Nothing of that call is
	// written.
	ErrInvalidMessage = errors.New("outbox: invalid message")
)

// MaxLastErrorBytes bounds Record.LastError. Longer error texts are cut
// (at a UTF-8 boundary) and end in "…".
const MaxLastErrorBytes = 512

// Truncate returns s as valid UTF-8 of at most maxBytes bytes: every run
// of bytes that is not valid UTF-8 becomes U+FFFD, and a longer text is
// cut at a character boundary and ends in "…". Control characters are
// kept. Stores use it to fit error texts into their columns
// (MaxLastErrorBytes), so that no text a sink or a panic produces can fail
// the write of an outcome. Its work is bounded by maxBytes, not by the
// length of s.
func Truncate(s string, maxBytes int) string { return safetext.Truncate(s, maxBytes) }
