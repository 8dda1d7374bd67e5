package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// runConsumers lists, adds and removes the named consumers of a table.
func runConsumers(c *cli, args []string) int {
	fs := c.flags("[list] | add NAME --from now|beginning | remove NAME  [--dry-run] [--yes]")
	from := fs.String("from", "", "add: where the consumer starts: now (only new messages) or beginning (every retained message, then new ones)")
	cf := addConfirm(fs)
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	verb, name, start, code := c.consumersArgs(*from)
	if code != exitOK {
		return code
	}
	if code, ok := c.connect(); !ok {
		return code
	}
	defer c.close()
	switch verb {
	case "add":
		return c.addConsumer(name, start, cf)
	case "remove":
		return c.removeConsumer(name, cf)
	}
	return c.listConsumers()
}

// consumersArgs reads the verb, the consumer name and --from.
func (c *cli) consumersArgs(from string) (verb, name string, start backend.StartFrom, code int) {
	verb = "list"
	if len(c.args) > 0 {
		verb = c.args[0]
	}
	changes := verb == "add" || verb == "remove"
	switch {
	case verb == "list" && len(c.args) <= 1:
	case verb == "list":
		return "", "", 0, c.extraArgs("consumers list takes no arguments", c.args[1:], c.tableInDB)
	case changes && len(c.args) == 2:
		name = c.args[1]
	case changes && len(c.args) == 1:
		return "", "", 0, c.usageError("consumers %s takes a consumer name: outboxctl consumers %s NAME", verb, verb)
	case changes:
		return "", "", 0, c.extraArgs(fmt.Sprintf("consumers %s takes one consumer name", verb), c.args[1:], c.tableInDB)
	default:
		if s := didYouMean(verb, "", []string{"list", "add", "remove"}); s != "" {
			return "", "", 0, c.usageError("consumers takes list, add NAME or remove NAME, got %s%s", argText(verb), s)
		}
		return "", "", 0, c.extraArgs("consumers takes list, add NAME or remove NAME", c.args[:1], c.tableInDB)
	}
	switch from {
	case "now":
		start = backend.StartNow
	case "beginning":
		start = backend.StartBeginning
	case "":
		if verb == "add" {
			return "", "", 0, c.usageError("add needs --from now or --from beginning")
		}
	default:
		return "", "", 0, c.usageError("--from %q: must be now or beginning%s", safe(from, false), didYouMean(from, "", []string{"now", "beginning"}))
	}
	if verb != "add" && from != "" {
		return "", "", 0, c.usageError("--from %q: only consumers add takes it, not consumers %s", safe(from, false), verb)
	}
	return verb, name, start, exitOK
}

// jsonConsumer is a registered consumer as --json prints it
// (backend.ConsumerInfo has no JSON names).
type jsonConsumer struct {
	Name        string    `json:"name"`
	StartSeq    int64     `json:"start_seq"`
	Backfilling bool      `json:"backfilling"`
	BackfillAt  int64     `json:"backfill_at,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	Removing    bool      `json:"removing"`
}

// listConsumers prints the registered consumers.
func (c *cli) listConsumers() int {
	infos, err := call(c, c.store.Consumers)
	if err != nil {
		return c.fail(exitFailed, err)
	}
	if c.json {
		out := make([]jsonConsumer, len(infos))
		for i, info := range infos {
			out[i] = jsonConsumer{Name: info.Name, StartSeq: info.StartSeq, Backfilling: info.Backfilling,
				BackfillAt: info.BackfillAt, CreatedAt: info.CreatedAt, Removing: info.Removing}
		}
		return c.printJSON(map[string]any{"table": c.table, "consumers": out})
	}
	tw := c.newTable("CONSUMER", "START SEQ", "BACKFILL", "ADDED")
	for _, info := range infos {
		backfill := "done"
		switch {
		case info.Removing:
			backfill = "being removed (run consumers remove again to finish)"
		case info.Backfilling:
			backfill = fmt.Sprintf("at seq %d", info.BackfillAt)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", info.Name, info.StartSeq, backfill, formatTime(info.CreatedAt))
	}
	_ = tw.Flush()
	return exitOK
}

func (c *cli) addConsumer(name string, from backend.StartFrom, cf confirm) int {
	if _, err := c.store.ConsumerQueue(name); err != nil {
		return c.usageError("%v", err)
	}
	what := map[backend.StartFrom]string{
		backend.StartNow:       "messages written from now on",
		backend.StartBeginning: "every retained message (backfilled in batches by its worker), then new ones",
	}[from]
	if code, ok := c.proceed(cf, fmt.Sprintf("add consumer %q to %s, getting %s", name, c.table, what)); !ok {
		return code
	}
	err := call0(c, func(ctx context.Context) error { return c.store.AddConsumer(ctx, name, from) })
	switch {
	case errors.Is(err, backend.ErrConsumerExists):
		return c.fail(exitConflict, err)
	case err != nil:
		return c.fail(exitFailed, err)
	}
	return c.report("added", "added", 1)
}

func (c *cli) removeConsumer(name string, cf confirm) int {
	cs, err := c.store.ConsumerQueue(name)
	if err != nil {
		return c.usageError("%v", err)
	}
	// A consumer whose removal has not finished is still listed; one that
	// is not listed is not found, with or without --yes.
	infos, err := call(c, c.store.Consumers)
	if err != nil {
		return c.fail(exitFailed, err)
	}
	names := make([]string, len(infos))
	for i, info := range infos {
		names[i] = info.Name
	}
	if !slices.Contains(names, name) {
		return c.fail(exitNotFound, fmt.Errorf("no consumer %q of %s%s", name, c.table, didYouMean(name, "", names)))
	}
	st, err := call(c, cs.Stats)
	switch {
	case errors.Is(err, backend.ErrUnknownConsumer):
		// Its removal has started: remove finishes it.
	case err != nil:
		return c.fail(exitFailed, err)
	}
	if code, ok := c.proceed(cf, fmt.Sprintf("remove consumer %q of %s and its delivery state (%d pending, %d dead: they will never reach it); retention stops waiting for it", name, c.table, st.Pending, st.Dead)); !ok {
		return code
	}
	n, err := call(c, func(ctx context.Context) (int, error) { return c.store.RemoveConsumer(ctx, name) })
	if errors.Is(err, backend.ErrUnknownConsumer) {
		return c.fail(exitNotFound, fmt.Errorf("no consumer %q of %s", name, c.table))
	}
	if err != nil {
		return c.fail(exitFailed, fmt.Errorf("after deleting %d state rows: %w", n, err))
	}
	return c.report("deleted_state_rows", "deleted state rows", n)
}
