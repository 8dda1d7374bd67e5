package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/outboxrelay/outboxrelay/store/mysql"
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
	ctx := context.Background()
	if code, ok := c.connect(ctx); !ok {
		return code
	}
	defer c.close()
	switch verb {
	case "add":
		return c.addConsumer(ctx, name, start, cf)
	case "remove":
		return c.removeConsumer(ctx, name, cf)
	}
	return c.listConsumers(ctx)
}

// consumersArgs reads the verb, the consumer name and --from.
func (c *cli) consumersArgs(from string) (verb, name string, start mysql.StartFrom, code int) {
	verb = "list"
	if len(c.args) > 0 {
		verb = c.args[0]
	}
	switch {
	case verb == "list" && len(c.args) <= 1:
	case (verb == "add" || verb == "remove") && len(c.args) == 2:
		name = c.args[1]
	case verb == "add" || verb == "remove":
		return "", "", 0, c.usageError("%s takes one consumer name", verb)
	default:
		return "", "", 0, c.usageError("want list, add NAME or remove NAME, got %q", c.args)
	}
	switch from {
	case "now":
		start = mysql.StartNow
	case "beginning":
		start = mysql.StartBeginning
	case "":
		if verb == "add" {
			return "", "", 0, c.usageError("add needs --from now or --from beginning")
		}
	default:
		return "", "", 0, c.usageError("--from %q: must be now or beginning", from)
	}
	if verb != "add" && from != "" {
		return "", "", 0, c.usageError("--from is for add only")
	}
	return verb, name, start, exitOK
}

// listConsumers prints the registered consumers.
func (c *cli) listConsumers(ctx context.Context) int {
	infos, err := c.store.Consumers(ctx)
	if err != nil {
		return c.fail(exitFailed, err)
	}
	if c.json {
		return c.printJSON(map[string]any{"table": c.table, "consumers": infos})
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

func (c *cli) addConsumer(ctx context.Context, name string, from mysql.StartFrom, cf confirm) int {
	if _, err := c.store.Consumer(name); err != nil {
		return c.usageError("%v", err)
	}
	what := map[mysql.StartFrom]string{
		mysql.StartNow:       "messages written from now on",
		mysql.StartBeginning: "every retained message (backfilled in batches by its worker), then new ones",
	}[from]
	if code, ok := c.proceed(cf, fmt.Sprintf("add consumer %q to %s, getting %s", name, c.table, what)); !ok {
		return code
	}
	if err := c.store.AddConsumer(ctx, name, from); err != nil {
		return c.fail(exitFailed, err)
	}
	return c.report("added", 1)
}

func (c *cli) removeConsumer(ctx context.Context, name string, cf confirm) int {
	cs, err := c.store.Consumer(name)
	if err != nil {
		return c.usageError("%v", err)
	}
	st, err := cs.Stats(ctx)
	switch {
	case errors.Is(err, mysql.ErrUnknownConsumer):
		// Not registered: remove still cleans up state a failed removal left.
	case err != nil:
		return c.fail(exitFailed, err)
	}
	if code, ok := c.proceed(cf, fmt.Sprintf("remove consumer %q of %s and its delivery state (%d pending, %d dead: they will never reach it); retention stops waiting for it", name, c.table, st.Pending, st.Dead)); !ok {
		return code
	}
	n, err := c.store.RemoveConsumer(ctx, name)
	if errors.Is(err, mysql.ErrUnknownConsumer) {
		return c.fail(exitNotFound, fmt.Errorf("no consumer %q of %s", name, c.table))
	}
	if err != nil {
		return c.fail(exitFailed, fmt.Errorf("after deleting %d state rows: %w", n, err))
	}
	return c.report("deleted state rows", n)
}
