package roomservice

import (
	"context"
	"fmt"
	"time"
)

// PurgeCommands deletes the command log's rows created before olderThan,
// at most batch rows per statement (each its own short transaction, so
// that no long lock holds up commands), until a statement deletes fewer
// than batch. It returns how many rows it deleted, also when ctx ends or
// a statement fails part way. A command ID deleted here is free again: a
// retry of it runs as a new command.
//
// It is safe for concurrent use, and several instances may run it at
// once: they delete disjoint rows or wait on each other's locks.
func (s *Service) PurgeCommands(ctx context.Context, olderThan time.Time, batch int) (int64, error) {
	if batch < 1 {
		return 0, fmt.Errorf("roomservice: PurgeCommands batch %d: must be at least 1", batch)
	}
	var total int64
	for {
		res, err := s.db.ExecContext(ctx, "DELETE FROM room_commands WHERE created_at_ms < ? ORDER BY created_at_ms LIMIT ?",
			olderThan.UnixMilli(), batch)
		if err != nil {
			return total, fmt.Errorf("roomservice: purge command log: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("roomservice: purge command log: %w", err)
		}
		total += n
		if n < int64(batch) {
			return total, nil
		}
	}
}

// RunCommandRetention purges commands older than c.Retention, c.RetentionBatch
// rows per statement, once right away and then every c.RetentionInterval,
// until ctx ends (svckit.Retention.Run). A command ID is thus remembered
// for at least c.Retention, and at most one interval longer. c is taken
// as Config.WithDefaults leaves it; a zero field falls back to its
// default.
func (s *Service) RunCommandRetention(ctx context.Context, c CommandsConfig) {
	c.WithDefaults(DefaultCommandRetention).Run(ctx, s.log, "command log", func(ctx context.Context, age time.Duration, batch int) (int64, error) {
		return s.PurgeCommands(ctx, s.now().Add(-age), batch)
	})
}
