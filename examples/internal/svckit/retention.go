package svckit

import (
	"context"
	"log/slog"
	"time"
)

// Retention is the block of an ID log a service keeps for a while, and
// deletes the older part of in the background: an inbox's processed
// event IDs (activity-service), a command log's command IDs
// (room-service). A service names it for its own block (type
// InboxConfig = svckit.Retention) and keeps what is its own: the
// default age and the bounds its validation sets.
type Retention struct {
	// Retention is how long an ID is remembered. Its default is the
	// service's.
	Retention time.Duration `yaml:"retention"`
	// RetentionInterval is how often older IDs are deleted, at most
	// RetentionBatch per statement. Defaults to 1m and 1000.
	RetentionInterval time.Duration `yaml:"retention_interval"`
	RetentionBatch    int           `yaml:"retention_batch"`
}

// The defaults Retention.WithDefaults fills in.
const (
	DefaultRetentionInterval = time.Minute
	DefaultRetentionBatch    = 1000
)

// WithDefaults returns r with the service's age and the documented
// defaults filled in for every zero value.
func (r Retention) WithDefaults(retention time.Duration) Retention {
	OrDefault(&r.Retention, retention)
	OrDefault(&r.RetentionInterval, DefaultRetentionInterval)
	OrDefault(&r.RetentionBatch, DefaultRetentionBatch)
	return r
}

// Run deletes the IDs older than r.Retention (purge, which deletes at
// most batch per statement and returns how many it deleted, also when it
// fails part way), once right away and then every r.RetentionInterval,
// until ctx ends; then it returns, leaving nothing running. A failed
// round is logged and tried again at the next interval, so an ID is
// remembered for at least r.Retention, and at most one interval longer.
// what names the log in the log lines ("command log", "inbox"). r must
// have its defaults (WithDefaults).
func (r Retention) Run(ctx context.Context, log *slog.Logger, what string,
	purge func(ctx context.Context, age time.Duration, batch int) (deleted int64, err error)) {
	ticker := time.NewTicker(r.RetentionInterval)
	defer ticker.Stop()
	for {
		n, err := purge(ctx, r.Retention, r.RetentionBatch)
		switch {
		case err != nil && ctx.Err() == nil:
			log.ErrorContext(ctx, what+" retention failed; trying again later",
				slog.Int64("deleted", n), slog.Duration("retry_in", r.RetentionInterval), slog.Any("error", err))
		case n > 0:
			log.InfoContext(ctx, what+" retention", slog.Int64("deleted", n), slog.Duration("retention", r.Retention))
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
