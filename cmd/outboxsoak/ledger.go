package main

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sync"
	"time"
)

// delivery is what the receiver learns of one sink call that succeeded.
type delivery struct {
	Consumer   string
	ID         string
	Room       int
	Seq        int64 // the event's place in its room, from 1
	WrittenAt  time.Time
	ReceivedAt time.Time
}

// ledger books every delivery per consumer and checks it as it comes:
// duplicates (an event delivered again), order violations (an event
// delivered for the first time after a later event of its room), and
// the lag from the write to the sink. verify then finds what was lost
// against what committed. A ledger is safe for concurrent use.
type ledger struct {
	mu    sync.Mutex
	rooms int
	// steadyFrom is the end of the warm-up: lags after it also count in
	// the steady-state figures.
	steadyFrom time.Time
	// cause names what a duplicate received at a time is blamed on (the
	// latest fault before it); nil blames nothing.
	cause     func(at time.Time) string
	consumers map[string]*consumerBook
	// order lists the consumers in the order they were named.
	order []string
}

// consumerBook is one consumer's side of the ledger.
type consumerBook struct {
	keys []keyBook
	// deliveries counts every delivery, duplicates included; unique the
	// first delivery of each event.
	deliveries, unique int64
	duplicates         int64
	dupCauses          map[string]int64
	violations         int64
	violationSample    []string
	// mismatches counts deliveries of a room's place under another ID
	// than its first delivery had; strays deliveries of a room outside
	// the run or of a place before 1.
	mismatches, strays int64
	lagAll, lagSteady  histogram
	// The current sampling interval.
	interval       histogram
	intervalDeliv  int64
	intervalUnique int64
}

// keyBook is one room's deliveries to one consumer, by place.
type keyBook struct {
	counts  []uint8  // deliveries of place i+1, saturating at 255
	idHash  []uint32 // the hash of the first delivery's ID
	highest int64    // the highest place delivered so far
}

// maxSample bounds the examples a verdict lists.
const maxSample = 20

// noCause is the duplicate cause when no fault came before it.
const noCause = "none"

// newLedger returns a ledger of rooms rooms for the consumers named.
func newLedger(rooms int, consumers []string, steadyFrom time.Time) *ledger {
	l := &ledger{rooms: rooms, steadyFrom: steadyFrom, consumers: map[string]*consumerBook{}}
	for _, c := range consumers {
		l.consumers[c] = &consumerBook{keys: make([]keyBook, rooms), dupCauses: map[string]int64{}}
		l.order = append(l.order, c)
	}
	return l
}

// setSteadyFrom sets the end of the warm-up.
func (l *ledger) setSteadyFrom(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.steadyFrom = t
}

// setCause sets the function duplicates are blamed with.
func (l *ledger) setCause(cause func(at time.Time) string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cause = cause
}

// record books d. It returns an error for a consumer the ledger does
// not know (the delivery is not booked).
func (l *ledger) record(d delivery) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.consumers[d.Consumer]
	if b == nil {
		return fmt.Errorf("no consumer %q in this run", d.Consumer)
	}
	b.deliveries++
	b.intervalDeliv++
	if d.Room < 0 || d.Room >= l.rooms || d.Seq < 1 {
		b.strays++
		return nil
	}
	k := &b.keys[d.Room]
	i := int(d.Seq - 1)
	if i >= len(k.counts) {
		grow := max(i+1, 2*len(k.counts)) - len(k.counts)
		k.counts = append(k.counts, make([]uint8, grow)...)
		k.idHash = append(k.idHash, make([]uint32, grow)...)
	}
	h := hashID(d.ID)
	if k.counts[i] > 0 {
		l.bookDuplicate(b, k, i, h, d.ReceivedAt)
		return nil
	}
	k.counts[i], k.idHash[i] = 1, h
	b.unique++
	b.intervalUnique++
	if d.Seq < k.highest {
		b.violations++
		if len(b.violationSample) < maxSample {
			b.violationSample = append(b.violationSample, fmt.Sprintf("room %d: place %d (%s) after place %d", d.Room, d.Seq, d.ID, k.highest))
		}
	}
	k.highest = max(k.highest, d.Seq)
	lag := d.ReceivedAt.Sub(d.WrittenAt)
	b.lagAll.add(lag)
	b.interval.add(lag)
	if !d.ReceivedAt.Before(l.steadyFrom) {
		b.lagSteady.add(lag)
	}
	return nil
}

func (l *ledger) bookDuplicate(b *consumerBook, k *keyBook, i int, h uint32, at time.Time) {
	if k.counts[i] < 255 {
		k.counts[i]++
	}
	if k.idHash[i] != h {
		b.mismatches++
	}
	b.duplicates++
	cause := noCause
	if l.cause != nil {
		cause = l.cause(at)
	}
	b.dupCauses[cause]++
}

func hashID(id string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return h.Sum32()
}

// intervalFigures are one consumer's deliveries since the last call of
// takeInterval.
type intervalFigures struct {
	Deliveries, Unique int64
	Lag                lagFigures
	// Duplicates is the consumer's count of duplicates so far.
	Duplicates int64
}

// takeInterval returns every consumer's figures of the interval that
// ends now, and starts the next.
func (l *ledger) takeInterval() map[string]intervalFigures {
	return eachConsumer(l, func(b *consumerBook) intervalFigures {
		f := intervalFigures{Deliveries: b.intervalDeliv, Unique: b.intervalUnique, Lag: b.interval.figures(), Duplicates: b.duplicates}
		b.interval, b.intervalDeliv, b.intervalUnique = histogram{}, 0, 0
		return f
	})
}

// uniqueCounts returns how many distinct events each consumer has had.
func (l *ledger) uniqueCounts() map[string]int64 {
	return eachConsumer(l, func(b *consumerBook) int64 { return b.unique })
}

// eachConsumer returns get of every consumer's book, by consumer, under
// the ledger's lock.
func eachConsumer[T any](l *ledger, get func(b *consumerBook) T) map[string]T {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]T, len(l.consumers))
	for name, b := range l.consumers {
		out[name] = get(b)
	}
	return out
}

// verdict is one consumer's result of a run.
type verdict struct {
	Committed       int64            `json:"committed"`
	Deliveries      int64            `json:"deliveries"`
	Unique          int64            `json:"unique"`
	Lost            int64            `json:"lost"`
	LostSample      []place          `json:"lost_sample,omitempty"`
	Duplicates      int64            `json:"duplicates"`
	DuplicateCauses map[string]int64 `json:"duplicates_by_cause"`
	OrderViolations int64            `json:"order_violations"`
	OrderSample     []string         `json:"order_sample,omitempty"`
	// Phantoms are deliveries of events that never committed; Mismatches
	// of one event under two IDs; Strays of events outside the run.
	Phantoms   int64 `json:"phantoms"`
	Mismatches int64 `json:"mismatches"`
	Strays     int64 `json:"strays"`
	Lag        struct {
		All    lagFigures `json:"all"`
		Steady lagFigures `json:"after_warmup"`
	} `json:"lag"`
}

// place names one event: its room and its place in the room, and what
// the store says of it (filled in later).
type place struct {
	Room   int    `json:"room"`
	Seq    int64  `json:"seq"`
	ID     string `json:"id,omitempty"`
	Status string `json:"status,omitempty"`
}

// verify compares the deliveries with what committed: committed[r] is
// the number of events room r committed (places 1 to committed[r]).
func (l *ledger) verify(committed []int64) map[string]*verdict {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]*verdict, len(l.consumers))
	for name, b := range l.consumers {
		v := &verdict{Deliveries: b.deliveries, Unique: b.unique, Duplicates: b.duplicates,
			DuplicateCauses: maps.Clone(b.dupCauses), OrderViolations: b.violations, OrderSample: slices.Clone(b.violationSample),
			Mismatches: b.mismatches, Strays: b.strays}
		v.Lag.All, v.Lag.Steady = b.lagAll.figures(), b.lagSteady.figures()
		for r := range l.rooms {
			var n int64
			if r < len(committed) {
				n = committed[r]
			}
			v.Committed += n
			k := b.keys[r]
			for i, c := range k.counts {
				seq := int64(i + 1)
				switch {
				case seq <= n && c == 0:
					v.Lost++
					if len(v.LostSample) < maxSample {
						v.LostSample = append(v.LostSample, place{Room: r, Seq: seq})
					}
				case seq > n && c > 0:
					v.Phantoms++
				}
			}
			for seq := int64(len(k.counts)) + 1; seq <= n; seq++ { // never delivered, beyond what the book holds
				v.Lost++
				if len(v.LostSample) < maxSample {
					v.LostSample = append(v.LostSample, place{Room: r, Seq: seq})
				}
			}
		}
		out[name] = v
	}
	return out
}
