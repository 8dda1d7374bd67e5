package svckit

import (
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLimitListener: a closed connection frees its slot (once, however
// often it is closed), and closing the listener wakes an Accept that
// waits for a slot.
func TestLimitListener(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := newLimitListener(inner, 1)
	t.Cleanup(func() { l.Close() })
	accept := func() <-chan error {
		done := make(chan error, 1)
		go func() {
			c, err := l.Accept()
			if err == nil {
				err = c.Close()
				err = errors.Join(err, c.Close()) // a second Close must not free a second slot
			}
			done <- err
		}()
		return done
	}
	dial(t, inner.Addr().String())
	first, err := l.Accept()
	require.NoError(t, err)

	dial(t, inner.Addr().String())
	waiting := accept() // waits for first's slot
	require.NoError(t, first.Close())
	require.ErrorIs(t, <-waiting, net.ErrClosed, "accepted, then closed twice (the second Close fails)")
	require.Empty(t, l.slots, "every slot is free, none freed twice")

	l.slots <- struct{}{} // fill the only slot
	blocked := accept()
	require.NoError(t, l.Close())
	require.ErrorIs(t, <-blocked, net.ErrClosed)
}

// dial connects to addr, and closes the connection at the test's end.
func dial(t *testing.T, addr string) {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
}
