package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// confirm holds the flags every changing command has.
type confirm struct {
	yes, dryRun *bool
}

func addConfirm(fs *flag.FlagSet) confirm {
	return confirm{
		yes:    fs.Bool("yes", false, "do it (without --yes the command only shows what it would do)"),
		dryRun: fs.Bool("dry-run", false, "only show what would be done, and exit 0"),
	}
}

// proceed reports whether to change data; if not, it has printed what
// would happen and returns the exit code.
func (c *cli) proceed(cf confirm, what string) (int, bool) {
	if *cf.yes && !*cf.dryRun {
		return exitOK, true
	}
	if c.json {
		_ = c.printJSON(map[string]any{"would": what, "done": false})
	} else {
		fmt.Fprintf(c.out, "would %s\n", what)
	}
	if *cf.dryRun {
		return exitOK, false
	}
	return c.errorf(exitUnconfirmed, "nothing changed; run again with --yes to do it"), false
}

func runRequeue(c *cli, args []string) int {
	fs := c.flags("ID | (--type T --key K --older-than D --error-contains S | --all) [--batch N] [--limit N] [--dry-run] [--yes]")
	var f backend.DeadFilter
	fs.StringVar(&f.Type, "type", "", "only dead letters of this event type")
	fs.StringVar(&f.Key, "key", "", "only dead letters with this key")
	durationFlag(fs, &f.OlderThan, "older-than", 0, "only dead letters created at least this `duration` ago, "+durationHelp)
	fs.StringVar(&f.ErrorContains, "error-contains", "", "only dead letters whose last error contains this text")
	all := fs.Bool("all", false, "every dead letter (needed when no filter is given)")
	batch := fs.Int("batch", backend.DefaultRequeueBatch, "rows per statement")
	limit := fs.Int("limit", 0, "requeue at most this many (0: every match)")
	c.addConsumerFlag(fs)
	cf := addConfirm(fs)
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	filtered := f != backend.DeadFilter{}
	switch {
	case *batch < 1 || *batch > backend.MaxRequeueBatch:
		return c.usageError("--batch %d: must be 1 to %d", *batch, backend.MaxRequeueBatch)
	case *limit < 0:
		return c.usageError("--limit %d: must not be negative (0, the default, requeues every match)", *limit)
	case len(c.args) > 1:
		return c.extraArgs("requeue takes at most one event ID", c.args, c.tableInDB)
	case len(c.args) == 1 && (filtered || *all):
		return c.usageError("give an event ID or a filter, not both: got %s and %s", argText(c.args[0]),
			strings.Join(givenFlags(fs, "type", "key", "older-than", "error-contains", "all"), ", "))
	case len(c.args) == 0 && !filtered && !*all:
		return c.usageError("give an event ID, a filter, or --all to requeue every dead letter")
	}
	st, where, code, ok := c.connectState()
	if !ok {
		return code
	}
	defer c.close()
	if len(c.args) == 1 {
		return c.requeueOne(st, where, c.args[0], cf)
	}
	n, err := call(c, func(ctx context.Context) (int, error) { return st.CountDead(ctx, f) })
	if err != nil {
		return c.fail(exitFailed, err)
	}
	if *limit > 0 {
		n = min(n, *limit)
	}
	if code, ok := c.proceed(cf, fmt.Sprintf("requeue %d dead letters of %s", n, where)); !ok {
		return code
	}
	done, err := c.requeueDead(st, f, *batch, *limit)
	if err != nil {
		return c.fail(exitFailed, fmt.Errorf("after requeueing %d: %w", done, err))
	}
	return c.report("requeued", "requeued", done)
}

// requeueDead requeues up to limit (0: every) dead letters that match f,
// batch at a time, each batch one operation under --timeout, so that a
// long requeue is not cut short while each step is bounded.
func (c *cli) requeueDead(st state, f backend.DeadFilter, batch, limit int) (int, error) {
	total := 0
	for limit == 0 || total < limit {
		n := batch
		if limit > 0 {
			n = min(n, limit-total)
		}
		done, err := call(c, func(ctx context.Context) (int, error) {
			return st.RequeueDead(ctx, f, backend.RequeueOptions{BatchSize: n, Limit: n})
		})
		total += done
		if err != nil || done < n {
			return total, err
		}
	}
	return total, nil
}

func (c *cli) requeueOne(st state, where, id string, cf confirm) int {
	r, err := call(c, func(ctx context.Context) (outbox.Record, error) { return st.Get(ctx, id) })
	switch {
	case errors.Is(err, outbox.ErrNotFound), errors.Is(err, backend.ErrUnknownConsumer):
		return c.fail(exitNotFound, fmt.Errorf("no record with event ID %q in %s: %w", safe(id, false), where, err))
	case err != nil && r.ID == "":
		return c.fail(exitFailed, err)
	case err != nil:
		c.warn(err) // undecodable, but its status was read
	}
	if r.Status != outbox.StatusDead {
		return c.fail(exitConflict, fmt.Errorf("%q is %s, not dead: only dead letters are requeued", safe(id, false), r.Status))
	}
	if code, ok := c.proceed(cf, fmt.Sprintf("requeue dead letter %q (%s, %d attempts, last error %q)", safe(id, false), safe(r.Type, false), r.Attempts, safe(r.LastError, false))); !ok {
		return code
	}
	err = call0(c, func(ctx context.Context) error { return st.Requeue(ctx, id) })
	switch {
	case errors.Is(err, outbox.ErrNotFound):
		return c.fail(exitNotFound, err) // purged meanwhile
	case errors.Is(err, backend.ErrNotDead):
		return c.fail(exitConflict, err) // requeued or settled meanwhile
	case err != nil:
		return c.fail(exitFailed, err)
	}
	return c.report("requeued", "requeued", 1)
}

func runPurge(c *cli, args []string) int {
	fs := c.flags("--older-than DURATION [--batch N] [--dry-run] [--yes]")
	var olderThan time.Duration
	durationFlag(fs, &olderThan, "older-than", 0, "delete records published longer than this `duration` ago (required), "+durationHelp)
	batch := fs.Int("batch", outbox.DefaultRetentionBatch, fmt.Sprintf("rows per DELETE, 1 to %d", outbox.MaxBatchSize))
	cf := addConfirm(fs)
	if code, ok := c.parseNoArgs(fs, args, c.tableInDB); !ok {
		return code
	}
	switch {
	case len(givenFlags(fs, "older-than")) == 0:
		return c.usageError("--older-than is required: how old a finished record must be to be deleted (MySQL counts from its publish, PostgreSQL from its write), e.g. --older-than 30d")
	case olderThan == 0:
		return c.usageError("--older-than %v: must be more than 0", olderThan)
	case *batch < 1 || *batch > outbox.MaxBatchSize:
		return c.usageError("--batch %d: must be 1 to %d", *batch, outbox.MaxBatchSize)
	}
	if code, ok := c.connect(); !ok {
		return code
	}
	defer c.close()
	n, err := call(c, func(ctx context.Context) (int, error) { return c.store.CountPurgeable(ctx, olderThan) })
	if err != nil {
		return c.fail(exitFailed, err)
	}
	if code, ok := c.proceed(cf, fmt.Sprintf("delete %d records of %s %s more than %v ago and finished by every named consumer (pending and dead records are never deleted)", n, c.table, c.driver.agedFrom, olderThan)); !ok {
		return code
	}
	// The whole sweep is one operation under --timeout: the store offers
	// no bounded step that finishes a sweep. Running purge again goes on
	// where a timed-out one stopped. 10ms between batches spreads the load.
	total, err := call(c, func(ctx context.Context) (int, error) {
		return c.store.PurgeAll(ctx, olderThan, *batch, 10*time.Millisecond)
	})
	if err != nil {
		return c.fail(exitFailed, fmt.Errorf("after deleting %d (run purge again to go on): %w", total, err))
	}
	return c.report("deleted", "deleted", total)
}

// report prints what a command changed: "verb n", or with --json
// {"key": n, "done": true}; key is snake_case.
func (c *cli) report(key, verb string, n int) int {
	if c.json {
		return c.printJSON(map[string]any{key: n, "done": true})
	}
	fmt.Fprintf(c.out, "%s %d\n", verb, n)
	return exitOK
}
