package sinktest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// checkDelivers: messages arrive as published, from one goroutine and
// from several at once; a repeat is no error, and is held once where the
// peer dedupes.
func checkDelivers(t *testing.T, s *suite) error {
	tg := s.newTarget(t)
	var sent []outbox.Message
	for i := range 6 {
		m := s.message("delivers", i, fmt.Sprintf("key-%d", i%2))
		if err := publishOK(tg.Sink, m); err != nil {
			return err
		}
		sent = append(sent, m)
	}
	// Publish must be safe for concurrent use.
	const goroutines, each = 4, 5
	concurrent := make([]outbox.Message, 0, goroutines*each)
	for i := range goroutines * each {
		concurrent = append(concurrent, s.message("delivers", 100+i, fmt.Sprintf("key-%d", i%goroutines)))
	}
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for _, m := range concurrent[g*each : (g+1)*each] {
				if err := publishOK(tg.Sink, m); err != nil {
					errs[g] = fmt.Errorf("from %d goroutines at once: %w", goroutines, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	sent = append(sent, concurrent...)
	// At-least-once delivery hands a sink the same message again.
	if err := publishOK(tg.Sink, sent[0]); err != nil {
		return fmt.Errorf("publishing a message again (as the worker does after a lost settle) must succeed: %w", err)
	}
	// A message published after all others, to wait for: on an ordered
	// peer, what was published before it has arrived with it.
	last := s.message("delivers", 999, "key-0")
	if err := publishOK(tg.Sink, last); err != nil {
		return err
	}
	sent = append(sent, last)
	ds, err := waitHeld(tg, sent)
	if err != nil {
		return err
	}
	if err := s.checkHeld(ds, sent, nil); err != nil {
		return err
	}
	if s.DedupesByID {
		return checkOnce(ds, sent)
	}
	return nil
}

// checkOnce checks that the peer, which dedupes by ID, holds each of
// sent once.
func checkOnce(ds []Delivery, sent []outbox.Message) error {
	n := map[string]int{}
	for _, d := range ds {
		n[d.ID]++
	}
	for _, m := range sent {
		if n[m.ID] != 1 {
			return fmt.Errorf("the peer holds message %s %d times; Peer.DedupesByID says it keeps one copy of an ID", quote(m.ID), n[m.ID])
		}
	}
	return nil
}

// checkHostile: each hostile message is delivered unchanged or refused
// as Permanent, and the sink delivers afterwards.
func checkHostile(t *testing.T, s *suite) error {
	tg := s.newTarget(t)
	var accepted, refused []outbox.Message
	for _, h := range HostileMessages(s.id("hostile", 0)) {
		err := publishOK(tg.Sink, h.Msg)
		if err == nil {
			accepted = append(accepted, h.Msg)
			continue
		}
		var hang *hangError
		if errors.As(err, &hang) {
			return fmt.Errorf("hostile message (%s): %w", h.Name, err)
		}
		if !outbox.IsPermanent(err) || outbox.IsUnavailable(err) {
			return fmt.Errorf("hostile message (%s): Publish = %s %q: a message the peer cannot take as it is must be refused "+
				"as Permanent (a plain error is retried forever and holds up its key), or delivered unchanged", h.Name, class(err), cut(err.Error()))
		}
		if err := s.noSecrets("the error for a hostile message ("+h.Name+")", err); err != nil {
			return err
		}
		refused = append(refused, h.Msg)
	}
	t.Logf("hostile messages: %d delivered, %d refused as Permanent", len(accepted), len(refused))
	// No hostile message may stop the sink (say, by closing its
	// connection).
	after := s.message("hostile-after", 0, "key-0")
	if err := publishOK(tg.Sink, after); err != nil {
		return fmt.Errorf("after the hostile messages: %w", err)
	}
	ds, err := waitHeld(tg, append(slices.Clone(accepted), after))
	if err != nil {
		return err
	}
	held := idSet(ds)
	for _, m := range refused {
		if held[m.ID] {
			return fmt.Errorf("message %s was refused as Permanent, yet the peer holds it", quote(m.ID))
		}
	}
	return s.checkHeld(ds, append(accepted, after), refused)
}

// checkOrdered: one key's messages arrive in the order they were
// published, while other keys publish at the same time.
func checkOrdered(t *testing.T, s *suite) error {
	tg := s.newTarget(t)
	const keys, each = 3, 12
	perKey := make([][]outbox.Message, keys)
	errs := make([]error, keys)
	var wg sync.WaitGroup
	for k := range keys {
		for i := range each {
			perKey[k] = append(perKey[k], s.message("ordered", k*100+i, fmt.Sprintf("ordered-%d", k)))
		}
		wg.Go(func() {
			for _, m := range perKey[k] {
				if errs[k] = publishOK(tg.Sink, m); errs[k] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	sent := slices.Concat(perKey...)
	ds, err := waitHeld(tg, sent)
	if err != nil {
		return err
	}
	if err := s.checkHeld(ds, sent, nil); err != nil {
		return err
	}
	return checkOrder(ds, sent)
}
