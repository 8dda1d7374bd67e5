package secretfmt_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// TestCauseKeepsOnlySentinels: the stand-in has the caller's text and
// the sentinels, never the original error.
func TestCauseKeepsOnlySentinels(t *testing.T) {
	mine := errors.New("a sentinel of the caller")
	orig := &url.Error{Op: "Post", URL: "https://x.example/?usersig=SECRET", Err: os.ErrDeadlineExceeded}
	c := secretfmt.Cause("timed out", fmt.Errorf("%w; %w", orig, mine), mine)
	require.EqualError(t, c, "timed out")
	require.ErrorIs(t, c, os.ErrDeadlineExceeded)
	require.ErrorIs(t, c, mine)
	require.NotErrorIs(t, c, context.Canceled)
	require.True(t, c.Timeout())
	var ue *url.Error
	require.False(t, errors.As(c, &ue), "the original is out of reach")
	require.NotContains(t, fmt.Sprintf("%+v %#v", c, c), "SECRET")
	require.False(t, secretfmt.Cause("x", errors.New("plain")).Timeout())
}
