package benchkit

import (
	"context"
	"database/sql"
	"sync"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Lanes are outbox workers running side by side, each on a pool of its
// own, as instances of a service would be, until Stop.
type Lanes struct {
	// Workers are the workers, in the order StartLanes built them.
	Workers []*outbox.Worker
	stop    context.CancelFunc
	wg      sync.WaitGroup
	pools   []*sql.DB
}

// StartLanes starts n workers under ctx: for the i-th, pool opens its
// pool and worker builds the worker on it (its store, its sink and
// options). On an error it stops what it had started and returns the
// error.
func StartLanes(ctx context.Context, n int, pool func() (*sql.DB, error), worker func(i int, db *sql.DB) (*outbox.Worker, error)) (*Lanes, error) {
	runCtx, stop := context.WithCancel(ctx)
	l := &Lanes{stop: stop}
	for i := range n {
		db, err := pool()
		if err != nil {
			l.Stop()
			return nil, err
		}
		l.pools = append(l.pools, db)
		w, err := worker(i, db)
		if err != nil {
			l.Stop()
			return nil, err
		}
		l.Workers = append(l.Workers, w)
		l.wg.Go(func() { _ = w.Run(runCtx) })
	}
	return l, nil
}

// Stop ends the workers, waits for them to return, and closes their
// pools.
func (l *Lanes) Stop() {
	l.stop()
	l.wg.Wait()
	for _, db := range l.pools {
		db.Close()
	}
}

// Left is what the queues (a store and its named consumers) have yet to
// deliver, pending or dead, through the operator contract (Stats),
// whatever the store's schema: 0 once a drain has ended.
func Left(ctx context.Context, queues []backend.StatsReader) (int, error) {
	var left int
	for _, q := range queues {
		st, err := q.Stats(ctx)
		if err != nil {
			return 0, err
		}
		left += st.Pending + st.Dead
	}
	return left, nil
}
