package outboxui

import (
	"context"
	"sync"
	"time"
)

// sample is one queue's figures at one moment.
type sample struct {
	at            time.Time
	seq           int64 // the outbox's LastSeq
	pending, dead int
}

// history keeps the last n samples of every queue, for the throughput:
// bounded memory, whatever runs.
type history struct {
	n  int
	mu sync.Mutex
	// byQueue holds each queue's samples, oldest first.
	byQueue map[queueID][]sample
}

// queueID names one consumer of one outbox.
type queueID struct{ outbox, consumer string }

func newHistory(n int) *history { return &history{n: n, byQueue: map[queueID][]sample{}} }

// add appends a sample of q, dropping the oldest beyond n.
func (h *history) add(q queueID, s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ss := append(h.byQueue[q], s)
	if len(ss) > h.n {
		ss = append(ss[:0:0], ss[len(ss)-h.n:]...)
	}
	h.byQueue[q] = ss
}

// keep forgets the queues not in live (removed consumers).
func (h *history) keep(live map[queueID]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for q := range h.byQueue {
		if !live[q] {
			delete(h.byQueue, q)
		}
	}
}

// throughput is a queue's recent flow, from its samples.
type throughput struct {
	// WrittenPerMin and DonePerMin are the rates over the samples of the
	// last minute (or the two last samples, if they are further apart);
	// Known is false until there are two samples.
	WrittenPerMin, DonePerMin float64
	Known                     bool
	// Done is how many records left the backlog in each interval between
	// samples, oldest first: written minus the growth of pending plus
	// dead.
	Done []int64
}

// throughput derives q's flow from its samples. Records "done" are those
// that were written and no longer count as pending or dead: published
// (or purged). Gaps in the sequence from rolled-back writes count as
// written, so the figures are an upper bound when writes roll back.
func (h *history) throughput(q queueID) throughput {
	h.mu.Lock()
	ss := append([]sample(nil), h.byQueue[q]...)
	h.mu.Unlock()
	var t throughput
	if len(ss) < 2 {
		return t
	}
	done := func(a, b sample) int64 {
		return max(0, (b.seq-a.seq)-int64((b.pending+b.dead)-(a.pending+a.dead)))
	}
	for i := 1; i < len(ss); i++ {
		t.Done = append(t.Done, done(ss[i-1], ss[i]))
	}
	last := ss[len(ss)-1]
	first := len(ss) - 2
	for first > 0 && last.at.Sub(ss[first-1].at) <= time.Minute {
		first--
	}
	span := last.at.Sub(ss[first].at).Minutes()
	if span <= 0 {
		return t
	}
	t.Known = true
	t.WrittenPerMin = float64(last.seq-ss[first].seq) / span
	t.DonePerMin = float64(done(ss[first], last)) / span
	return t
}

// sampler takes a sample of every queue every interval until stopped.
type sampler struct {
	h      *Handler
	cancel context.CancelFunc
	done   chan struct{}
}

func (h *Handler) startSampler() *sampler {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{h: h, cancel: cancel, done: make(chan struct{})}
	go s.run(ctx)
	return s
}

func (s *sampler) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.h.opts.SampleInterval)
	defer t.Stop()
	for {
		s.h.sampleAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stop ends the sampler and waits for it.
func (s *sampler) stop() {
	s.cancel()
	<-s.done
}

// sampleAll samples every queue of every outbox once. Errors are logged;
// the next round tries again.
func (h *Handler) sampleAll(ctx context.Context) {
	live := map[queueID]bool{}
	for _, ob := range h.opts.Outboxes {
		views, err := h.readOutbox(ctx, ob, false)
		if err != nil {
			if ctx.Err() == nil {
				h.opts.Logger.WarnContext(ctx, "outboxui: sample", "outbox", ob.Name(), "error", err)
			}
			continue
		}
		for _, v := range views.Queues {
			q := queueID{ob.Name(), v.Consumer}
			live[q] = true
			if v.Err == "" {
				h.hist.add(q, sample{at: views.At, seq: views.LastSeq, pending: v.Pending, dead: v.Dead})
			}
		}
	}
	if ctx.Err() == nil {
		h.hist.keep(live)
	}
}
