package sinktest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// checkUnacceptable: each of Peer.Unacceptable fails as Permanent, and
// the peer does not hold it.
func checkUnacceptable(t *testing.T, s *suite) error {
	tg := s.newTarget(t)
	for i, m := range s.Unacceptable {
		err := publishOK(tg.Sink, m)
		switch {
		case err == nil:
			return fmt.Errorf("Peer.Unacceptable[%d] (ID %s): Publish = nil; a message the peer can never accept must fail as Permanent", i, quote(m.ID))
		case !outbox.IsPermanent(err) || outbox.IsUnavailable(err):
			return fmt.Errorf("Peer.Unacceptable[%d] (ID %s): Publish = %s %q; a message the peer can never accept must fail as Permanent "+
				"(retrying it would hold up its key forever; Unavailable would hold off the whole sink)", i, quote(m.ID), class(err), cut(err.Error()))
		}
		if err := s.noSecrets(fmt.Sprintf("the error for Peer.Unacceptable[%d]", i), err); err != nil {
			return err
		}
	}
	after := s.message("unacceptable-after", 0, "key-0")
	if err := publishOK(tg.Sink, after); err != nil {
		return fmt.Errorf("after the unacceptable messages: %w", err)
	}
	ds, err := waitHeld(tg, []outbox.Message{after})
	if err != nil {
		return err
	}
	held := idSet(ds)
	for i, m := range s.Unacceptable {
		if held[m.ID] {
			return fmt.Errorf("Peer.Unacceptable[%d] (ID %s) failed as Permanent, yet the peer holds it", i, quote(m.ID))
		}
	}
	return nil
}

// checkMisconfigured: a sink whose destination is not set up fails an
// ordinary message as Unavailable.
func checkMisconfigured(t *testing.T, s *suite) error {
	sink := s.Misconfigured(t)
	if sink == nil {
		t.Fatal("sinktest: Peer.Misconfigured returned nil")
	}
	closeWhenDone(t, sink)
	m := s.message("misconfigured", 0, "key-0")
	err := publishOK(sink, m)
	switch {
	case err == nil:
		return fmt.Errorf("the sink of Peer.Misconfigured: Publish = nil; it must fail as Unavailable")
	case !outbox.IsUnavailable(err):
		return fmt.Errorf("the sink of Peer.Misconfigured: Publish = %s %q; a destination that is not set up or not authorised "+
			"must fail as Unavailable, so that the worker holds off the sink and alerts instead of dead-lettering the backlog "+
			"or retrying quietly", class(err), cut(err.Error()))
	}
	return s.noSecrets("the error of the sink of Peer.Misconfigured", err)
}

// checkContext: a call with a cancelled or expired context returns an
// error the worker retries (or delivers).
func checkContext(t *testing.T, s *suite) error {
	tg := s.newTarget(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	var delivered []outbox.Message
	for i, c := range []struct {
		what string
		ctx  context.Context
	}{{"a cancelled context", cancelled}, {"an expired deadline", expired}} {
		m := s.message("context", i, "key-0")
		got := publish(c.ctx, tg.Sink, m)
		if err := wantRetryable("with "+c.what, m, got, &delivered); err != nil {
			return err
		}
		if err := s.noSecrets("the error for "+c.what, got); err != nil {
			return err
		}
	}
	if len(delivered) == 0 {
		return nil
	}
	// A nil error says the message was delivered: the peer must hold it.
	ds, err := waitHeld(tg, delivered)
	if err != nil {
		return fmt.Errorf("the sink's Publish returned nil with a context that was done: %w", err)
	}
	return s.checkHeld(ds, delivered, nil)
}

// checkSecrets: the sinks print and log without their secrets.
func checkSecrets(t *testing.T, s *suite) error {
	sinks := map[string]outbox.Sink{"the sink of Peer.NewSink": s.newTarget(t).Sink}
	if s.Misconfigured != nil {
		m := s.Misconfigured(t)
		closeWhenDone(t, m)
		sinks["the sink of Peer.Misconfigured"] = m
	}
	for what, sink := range sinks {
		for _, text := range printed(sink) {
			if err := s.noSecretIn(what+" printed or logged", text); err != nil {
				return err
			}
		}
	}
	return nil
}
