package tencentimtest

import "time"

// DefaultMaxRecords is Config.MaxRecords' default: how many requests and
// how many messages the fake keeps.
const DefaultMaxRecords = 1000

// ring keeps the last max values pushed, oldest first. Its zero value
// is unusable; make one with newRing.
type ring[T any] struct {
	buf   []T
	start int // index of the oldest value once buf is full
	max   int
}

func newRing[T any](max int) *ring[T] { return &ring[T]{max: max} }

// push appends v, dropping the oldest value when the ring is full.
func (r *ring[T]) push(v T) {
	if len(r.buf) < r.max {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.start] = v
	r.start = (r.start + 1) % r.max
}

// len is the number of values kept.
func (r *ring[T]) len() int { return len(r.buf) }

// each calls f on every value kept, oldest first.
func (r *ring[T]) each(f func(T)) {
	for i := range r.buf {
		f(r.buf[(r.start+i)%len(r.buf)])
	}
}

// all returns a copy of the values kept, oldest first.
func (r *ring[T]) all() []T {
	out := make([]T, 0, len(r.buf))
	r.each(func(v T) { out = append(out, v) })
	return out
}

// groupRandom is a message's Random in its group.
type groupRandom struct {
	group  string
	random uint32
}

type sentRandom struct {
	at  time.Time
	seq uint64
}

// randomEntry is one Random, in the order they were sent.
type randomEntry struct {
	key groupRandom
	at  time.Time
}

// randomWindow remembers the Randoms sent within dedupeWindow, at most
// max of them: past that, the oldest are forgotten early (so a repeat of
// one of them is stored again), which bounds a busy fake's memory.
type randomWindow struct {
	sent  map[groupRandom]sentRandom
	order []randomEntry // order[head:] are remembered, oldest first
	head  int
	max   int
}

func newRandomWindow(max int) *randomWindow {
	return &randomWindow{sent: map[groupRandom]sentRandom{}, max: max}
}

// lookup returns what was sent with key within the window before now.
func (w *randomWindow) lookup(key groupRandom, now time.Time) (sentRandom, bool) {
	prev, ok := w.sent[key]
	if !ok || now.Sub(prev.at) >= dedupeWindow {
		return sentRandom{}, false
	}
	return prev, true
}

// add remembers key, sent at now as seq, and forgets what has left the
// window or exceeds max.
func (w *randomWindow) add(key groupRandom, now time.Time, seq uint64) {
	w.sent[key] = sentRandom{at: now, seq: seq}
	w.order = append(w.order, randomEntry{key: key, at: now})
	for w.head < len(w.order) && (len(w.order)-w.head > w.max || now.Sub(w.order[w.head].at) >= dedupeWindow) {
		e := w.order[w.head]
		if w.sent[e.key].at.Equal(e.at) { // not sent again since
			delete(w.sent, e.key)
		}
		w.head++
	}
	if w.head > len(w.order)/2 {
		// Copy the rest down, so that the array behind order stays
		// within twice max; amortised, a constant cost per add.
		w.order = append(w.order[:0:0], w.order[w.head:]...)
		w.head = 0
	}
}

// len is the number of Randoms remembered.
func (w *randomWindow) len() int { return len(w.sent) }
