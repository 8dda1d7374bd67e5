package outbox

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPermanent(t *testing.T) {
	require.NoError(t, Permanent(nil))
	require.False(t, IsPermanent(nil))
	require.False(t, IsPermanent(io.EOF))

	p := Permanent(io.EOF)
	require.True(t, IsPermanent(p))
	require.ErrorIs(t, p, io.EOF, "errors.Is sees through the marker")
	require.Equal(t, io.EOF.Error(), p.Error())

	wrapped := fmt.Errorf("send: %w", p)
	require.True(t, IsPermanent(wrapped), "the marker is found through further wrapping")
	require.True(t, IsPermanent(errors.Join(io.ErrClosedPipe, p)))
}

func TestValidTraceParent(t *testing.T) {
	for s, want := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00": true,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": false, // zero trace id
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01": false, // zero parent id
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": false, // unknown version
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": false, // upper case
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0":  false,
		"": false,
	} {
		require.Equal(t, want, ValidTraceParent(s), s)
	}
}
