package tencentim

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/outboxrelay/outboxrelay/internal/ctxwait"
)

// limiter keeps the sink under Tencent's call rates: one limit for all
// calls and one per group. Each allows a burst of a tenth of its rate, so
// a backlog drains at the limit without tripping 60007 or 10023. Time and
// sleeping are injected, so tests count tokens on a fake clock.
type limiter struct {
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error

	global    *rate.Limiter // nil: unlimited
	groupRate float64       // <= 0: unlimited

	mu      sync.Mutex
	groups  map[string]*groupLimit
	inserts int
}

type groupLimit struct {
	lim  *rate.Limiter
	last time.Time
}

// Group limiters idle this long are full again and are dropped once the
// map holds more than maxGroupLimiters.
const (
	groupIdle        = time.Minute
	maxGroupLimiters = 10_000
)

func newLimiter(c Config) *limiter {
	l := &limiter{now: c.Now, sleep: ctxwait.Sleep, groupRate: c.GroupRateLimit, groups: map[string]*groupLimit{}}
	if c.RateLimit > 0 {
		l.global = rate.NewLimiter(rate.Limit(c.RateLimit), burstFor(c.RateLimit))
	}
	return l
}

func burstFor(perSecond float64) int {
	return max(1, int(math.Ceil(perSecond/10)))
}

// wait blocks until a call to group is allowed, or ctx is done.
func (l *limiter) wait(ctx context.Context, group string) error {
	now := l.now()
	var (
		reserved []*rate.Reservation
		delay    time.Duration
	)
	for _, lim := range []*rate.Limiter{l.global, l.forGroup(group, now)} {
		if lim == nil {
			continue
		}
		r := lim.ReserveN(now, 1)
		reserved = append(reserved, r)
		delay = max(delay, r.DelayFrom(now))
	}
	if delay <= 0 {
		return nil
	}
	if err := l.sleep(ctx, delay); err != nil {
		for _, r := range reserved {
			r.CancelAt(now)
		}
		return err
	}
	return nil
}

func (l *limiter) forGroup(group string, now time.Time) *rate.Limiter {
	if l.groupRate <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.groups[group]
	if g == nil {
		l.evictIdleLocked(now)
		g = &groupLimit{lim: rate.NewLimiter(rate.Limit(l.groupRate), burstFor(l.groupRate))}
		l.groups[group] = g
	}
	g.last = now
	return g.lim
}

func (l *limiter) evictIdleLocked(now time.Time) {
	l.inserts++
	if len(l.groups) < maxGroupLimiters || l.inserts%1000 != 0 {
		return
	}
	for id, g := range l.groups {
		if now.Sub(g.last) > groupIdle {
			delete(l.groups, id)
		}
	}
}
