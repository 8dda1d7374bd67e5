package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// retentionPause separates the DELETEs of one retention pass, so that a
// large purge is spread out rather than hammering the table.
const retentionPause = 20 * time.Millisecond

// retain runs retention passes until ctx is done.
func (w *Worker) retain(ctx context.Context, p backend.Purger) {
	ticker := time.NewTicker(w.opts.RetentionInterval)
	defer ticker.Stop()
	for {
		w.purgePass(ctx, p)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// purgePass deletes batches until there is nothing older than Retention.
func (w *Worker) purgePass(ctx context.Context, p backend.Purger) {
	total := 0
	defer func() {
		if total > 0 {
			w.log.InfoContext(context.WithoutCancel(ctx), "outbox retention purged published records",
				slog.Int("deleted", total), slog.Duration("older_than", w.opts.Retention))
		}
	}()
	for ctx.Err() == nil {
		storeCtx, cancel := context.WithTimeout(ctx, w.opts.StoreTimeout)
		n, err := p.PurgePublished(storeCtx, w.opts.Retention, w.opts.RetentionBatch)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				w.log.WarnContext(ctx, "outbox retention failed; the next pass tries again", slog.Any("error", err))
			}
			return
		}
		if n > 0 {
			total += n
			w.observe(ctx, Event{Kind: EventPurged, Count: n})
		}
		if n < w.opts.RetentionBatch {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(retentionPause):
		}
	}
}
