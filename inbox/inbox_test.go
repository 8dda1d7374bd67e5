package inbox_test

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox"
)

func TestResultAndKindNames(t *testing.T) {
	require.Equal(t, "processed", inbox.Processed.String())
	require.Equal(t, "duplicate", inbox.Duplicate.String())
	require.Equal(t, "none", inbox.Result(0).String())
	for k, want := range map[inbox.EventKind]string{
		inbox.EventProcessed: "processed", inbox.EventDuplicate: "duplicate", inbox.EventHandlerFailed: "handler_failed",
		inbox.EventFailed: "failed", inbox.EventConflict: "conflict", inbox.EventPurged: "purged", 0: "unknown",
	} {
		require.Equal(t, want, k.String())
	}
}

func TestPanicError(t *testing.T) {
	pe := &inbox.PanicError{Value: io.ErrUnexpectedEOF}
	require.ErrorIs(t, pe, io.ErrUnexpectedEOF)
	require.EqualError(t, pe, "inbox: handler panicked: unexpected EOF")
	require.NoError(t, (&inbox.PanicError{Value: 42}).Unwrap())
	var target *inbox.PanicError
	require.True(t, errors.As(error(pe), &target))
}

func TestValidateIDBoundaries(t *testing.T) {
	long := make([]rune, inbox.MaxIDLength)
	for i := range long {
		long[i] = '界'
	}
	require.NoError(t, inbox.ValidateID(string(long)), "255 characters of 3 bytes")
	require.ErrorIs(t, inbox.ValidateID(string(long)+"x"), inbox.ErrInvalidID)
	require.NoError(t, inbox.ValidateID("\x00"), "a control character is an ID")
}
