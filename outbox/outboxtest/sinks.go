package outboxtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// Recorder is a Sink that accepts every message and remembers it, for
// tests. It is safe for concurrent use.
type Recorder struct {
	mu      sync.Mutex
	msgs    []outbox.Message
	counts  map[string]int
	changed chan struct{} // closed and replaced on every delivery
}

var _ outbox.Sink = (*Recorder)(nil)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder {
	return &Recorder{counts: map[string]int{}, changed: make(chan struct{})}
}

// Publish records msg and returns nil.
func (r *Recorder) Publish(_ context.Context, msg outbox.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
	r.counts[msg.ID]++
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// Messages returns every delivery, in order, repeats included.
func (r *Recorder) Messages() []outbox.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Message(nil), r.msgs...)
}

// Len returns the number of deliveries, repeats included.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// Distinct returns the number of distinct message IDs delivered.
func (r *Recorder) Distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.counts)
}

// Count returns how often the message with the ID was delivered.
func (r *Recorder) Count(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[id]
}

// Duplicates returns the IDs delivered more than once, with their counts.
func (r *Recorder) Duplicates() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := map[string]int{}
	for id, n := range r.counts {
		if n > 1 {
			d[id] = n
		}
	}
	return d
}

// WaitDistinct blocks until at least n distinct IDs have been delivered or
// ctx is done.
func (r *Recorder) WaitDistinct(ctx context.Context, n int) error {
	for {
		r.mu.Lock()
		got, changed := len(r.counts), r.changed
		r.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("outboxtest: %d of %d distinct messages delivered: %w", got, n, ctx.Err())
		case <-changed:
		}
	}
}

// ErrInjected is the error FlakySink returns for the failures it injects.
var ErrInjected = errors.New("outboxtest: injected sink failure")

// FlakySink wraps a Sink and injects faults, for tests: failures at a
// random rate (from a seeded source, so runs repeat), the next n calls
// failing or hanging, and failures or panics for chosen messages. Rules
// are checked in this order: PanicIf, FailIf, HangNext, FailNext, the
// random rate; a call no rule catches goes to the wrapped sink. It is safe
// for concurrent use.
type FlakySink struct {
	next outbox.Sink

	mu       sync.Mutex
	rng      *rand.Rand
	failRate float64
	failNext int
	hangNext int
	failIf   func(outbox.Message) error
	panicIf  func(outbox.Message) bool
	calls    int
	failed   int
}

var _ outbox.Sink = (*FlakySink)(nil)

// NewFlakySink returns a FlakySink in front of next that injects nothing
// until told to. seed fixes its random choices.
func NewFlakySink(next outbox.Sink, seed uint64) *FlakySink {
	return &FlakySink{next: next, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// SetFailRate makes each call fail with probability p (0 to 1).
func (f *FlakySink) SetFailRate(p float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failRate = p
}

// FailNext makes the next n calls fail.
func (f *FlakySink) FailNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failNext = n
}

// HangNext makes the next n calls block until their context is done, as a
// server that never answers would; they then return the context's error.
func (f *FlakySink) HangNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hangNext = n
}

// FailIf fails every call for which rule returns a non-nil error, with that
// error. nil removes the rule.
func (f *FlakySink) FailIf(rule func(outbox.Message) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failIf = rule
}

// PanicIf makes every call for which rule returns true panic. nil removes
// the rule.
func (f *FlakySink) PanicIf(rule func(outbox.Message) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.panicIf = rule
}

// Calls returns the number of Publish calls so far.
func (f *FlakySink) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Failed returns the number of calls that failed, hung or panicked by
// injection.
func (f *FlakySink) Failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

// Publish applies the rules, then passes msg on to the wrapped sink.
func (f *FlakySink) Publish(ctx context.Context, msg outbox.Message) error {
	fault, err := f.decide(msg)
	switch fault {
	case faultPanic:
		panic(fmt.Sprintf("outboxtest: injected panic for %s", msg.ID))
	case faultError:
		return err
	case faultHang:
		<-ctx.Done()
		return fmt.Errorf("outboxtest: injected hang: %w", ctx.Err())
	}
	return f.next.Publish(ctx, msg)
}

type fault int

const (
	faultNone fault = iota
	faultError
	faultHang
	faultPanic
)

func (f *FlakySink) decide(msg outbox.Message) (fault, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	result, err := faultNone, error(nil)
	switch {
	case f.panicIf != nil && f.panicIf(msg):
		result = faultPanic
	case f.failIf != nil:
		if err = f.failIf(msg); err != nil {
			result = faultError
		}
	}
	if result != faultNone {
		f.failed++
		return result, err
	}
	switch {
	case f.hangNext > 0:
		f.hangNext--
		result = faultHang
	case f.failNext > 0:
		f.failNext--
		result, err = faultError, ErrInjected
	case f.failRate > 0 && f.rng.Float64() < f.failRate:
		result, err = faultError, ErrInjected
	}
	if result != faultNone {
		f.failed++
	}
	return result, err
}
