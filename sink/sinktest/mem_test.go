package sinktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// memPeer is a broker in memory for the suite's own tests: destinations
// that keep what they are sent in order, an outage that leaves callers
// waiting (a black hole) until it ends, and dedupe by ID when asked.
type memPeer struct {
	dedupe bool
	// flaw breaks the sinks of this peer in one way (see flaw).
	flaw flaw

	mu    sync.Mutex
	up    chan struct{} // closed while the peer is up
	dests map[string][]Delivery
	// forever is what leaky sinks' goroutines wait on.
	forever chan struct{}
	n       int
}

// flaw is one way a sink can break a promise the suite checks.
type flaw int

const (
	flawNone                   flaw = iota
	flawDropsHeaders                // Delivers
	flawDuplicates                  // Delivers (with DedupesByID)
	flawManglesPayload              // HostileMessages: not UTF-8 made valid
	flawPlainErrorForBig            // HostileMessages: a plain error for a payload it refuses
	flawKeepsHeaderInjection        // HostileMessages: a CR LF in a header value becomes another header
	flawReorders                    // Ordered
	flawRetryableUnacceptable       // Unacceptable
	flawPermanentMisconfigured      // Misconfigured
	flawPermanentContext            // Context
	flawPrintsSecret                // Secrets
	flawWrapsSecret                 // Misconfigured (an error it wraps shows the secret)
	flawPermanentOutage             // Outage: an outage called permanent
	flawIgnoresContext              // Outage: a call that waits out the outage whatever its context
	flawLosesDuringOutage           // Outage: nil while the peer is away, nothing held
	flawLeaksGoroutine              // NoGoroutineLeak
)

const memSecret = "mem-token-0123456789abcdef-do-not-print"

func newMemPeer(dedupe bool, f flaw) *memPeer {
	p := &memPeer{dedupe: dedupe, flaw: f, up: make(chan struct{}), dests: map[string][]Delivery{}, forever: make(chan struct{})}
	close(p.up)
	return p
}

// peer is the sinktest.Peer of p.
func (p *memPeer) peer() Peer {
	return Peer{
		NewSink: func(t *testing.T) Target {
			p.mu.Lock()
			p.n++
			dest := fmt.Sprintf("dest-%d", p.n)
			p.mu.Unlock()
			return Target{Sink: &memSink{peer: p, dest: dest, token: memSecret}, Received: func() ([]Delivery, error) { return p.held(dest), nil }}
		},
		Stop:  func(*testing.T) { p.stop() },
		Start: func(*testing.T) { p.start() },
		Unacceptable: []outbox.Message{
			{ID: "unacceptable-1", Type: "Unacceptable", Key: "k", Payload: []byte("{}")},
		},
		Misconfigured: func(*testing.T) outbox.Sink { return &memSink{peer: p, dest: "missing", token: memSecret} },
		Secrets:       []string{memSecret},
		Ordered:       true,
		DedupesByID:   p.dedupe,
		KeepsHeaders:  true,
	}
}

func (p *memPeer) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = make(chan struct{})
}

func (p *memPeer) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.up:
	default:
		close(p.up)
	}
}

func (p *memPeer) upChan() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.up
}

func (p *memPeer) isUp() bool {
	select {
	case <-p.upChan():
		return true
	default:
		return false
	}
}

func (p *memPeer) held(dest string) []Delivery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Delivery(nil), p.dests[dest]...)
}

// store keeps d at dest, unless the peer dedupes and has its ID.
func (p *memPeer) store(dest string, d Delivery) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ds := p.dests[dest]
	if p.dedupe && p.flaw != flawDuplicates {
		for _, have := range ds {
			if have.ID == d.ID {
				return
			}
		}
	}
	if p.flaw == flawReorders && len(ds) > 0 {
		// The new message jumps ahead of the last one.
		p.dests[dest] = append(ds[:len(ds)-1:len(ds)-1], d, ds[len(ds)-1])
		return
	}
	p.dests[dest] = append(ds, d)
}

// memSink publishes to one destination of a memPeer.
type memSink struct {
	peer  *memPeer
	dest  string
	token string
}

// String describes the sink without its token, unless it is flawed.
func (s *memSink) String() string {
	if s.peer.flaw == flawPrintsSecret {
		return "memSink{dest:" + s.dest + " token:" + s.token + "}"
	}
	return "memSink{dest:" + s.dest + "}"
}

// GoString is String, for %#v.
func (s *memSink) GoString() string { return s.String() }

// maxPayload is the largest payload the peer takes.
const maxPayload = 2 << 20

func (s *memSink) Publish(ctx context.Context, m outbox.Message) error {
	p := s.peer
	if p.flaw == flawLeaksGoroutine {
		go func() { <-p.forever }()
	}
	if err := ctx.Err(); err != nil {
		if p.flaw == flawPermanentContext {
			return outbox.Permanent(err)
		}
		return fmt.Errorf("mem: %w", err)
	}
	if m.Type == "Unacceptable" {
		if p.flaw == flawRetryableUnacceptable {
			return errors.New("mem: unacceptable type")
		}
		return outbox.Permanent(errors.New("mem: unacceptable type"))
	}
	if len(m.Payload) > maxPayload {
		if p.flaw == flawPlainErrorForBig {
			return errors.New("mem: payload too large")
		}
		return outbox.Permanent(fmt.Errorf("mem: payload of %d bytes, over %d", len(m.Payload), maxPayload))
	}
	if s.dest == "missing" {
		switch p.flaw {
		case flawPermanentMisconfigured:
			return outbox.Permanent(errors.New("mem: no such destination"))
		case flawWrapsSecret:
			return outbox.Unavailable(&cleanText{text: "mem: refused", err: errors.New("mem: token " + s.token + " refused")})
		}
		return outbox.Unavailable(errors.New("mem: no such destination"))
	}
	if p.flaw == flawLosesDuringOutage && !p.isUp() {
		return nil
	}
	if err := s.waitUp(ctx); err != nil {
		return err
	}
	p.store(s.dest, s.delivery(m))
	return nil
}

// waitUp waits until the peer is up, or ctx is done.
func (s *memSink) waitUp(ctx context.Context) error {
	p := s.peer
	switch p.flaw {
	case flawPermanentOutage:
		if !p.isUp() {
			return outbox.Permanent(errors.New("mem: peer away"))
		}
	case flawIgnoresContext:
		<-p.upChan()
	}
	select {
	case <-p.upChan():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("mem: peer away: %w", ctx.Err())
	}
}

// delivery is m as the peer keeps it: a copy, flawed as asked.
func (s *memSink) delivery(m outbox.Message) Delivery {
	d := Delivery{ID: m.ID, Key: m.Key, Type: m.Type, Payload: bytes.Clone(m.Payload), Headers: maps.Clone(m.Headers)}
	switch s.peer.flaw {
	case flawDropsHeaders:
		d.Headers = nil
	case flawManglesPayload:
		d.Payload = bytes.ToValidUTF8(d.Payload, []byte("\uFFFD"))
	case flawKeepsHeaderInjection:
		for k, v := range d.Headers {
			if name, value, ok := strings.Cut(v, "\r\n"); ok {
				d.Headers[k] = name
				k2, v2, _ := strings.Cut(value, ": ")
				d.Headers[k2] = v2
			}
		}
	}
	return d
}

// cleanText is an error whose text is clean but which wraps one that is
// not.
type cleanText struct {
	text string
	err  error
}

func (e *cleanText) Error() string { return e.text }
func (e *cleanText) Unwrap() error { return e.err }
