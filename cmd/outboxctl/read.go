package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// consumerStats is one named consumer's line of stats.
type consumerStats struct {
	Name            string               `json:"name"`
	StartSeq        int64                `json:"start_seq"`
	Backfilling     bool                 `json:"backfilling"`
	BackfillAt      int64                `json:"backfill_at,omitempty"`
	Pending         int                  `json:"pending"`
	Leased          int                  `json:"leased"`
	Dead            int                  `json:"dead"`
	OldestPendingMS int64                `json:"oldest_pending_ms"`
	ByType          map[string]typeStats `json:"by_type"`
}

// typeStats is one event type's line of stats, as --json prints it
// (backend.TypeStats has no JSON names).
type typeStats struct {
	Pending int `json:"pending"`
	Dead    int `json:"dead"`
}

// byType gives a backend.Stats.ByType its JSON names.
func byType(m map[string]backend.TypeStats) map[string]typeStats {
	out := make(map[string]typeStats, len(m))
	for t, ts := range m {
		out[t] = typeStats{Pending: ts.Pending, Dead: ts.Dead}
	}
	return out
}

func runStats(c *cli, args []string) int {
	fs := c.flags("[--json]")
	if code, ok := c.parseNoArgs(fs, args, c.tableInDB); !ok {
		return code
	}
	if code, ok := c.connect(); !ok {
		return code
	}
	defer c.close()
	st, err := call(c, c.store.Stats)
	if err != nil {
		return c.fail(exitFailed, err)
	}
	consumers, err := c.consumerStats()
	if err != nil {
		return c.fail(exitFailed, err)
	}
	if c.json {
		return c.printJSON(map[string]any{
			"table": c.table, "pending": st.Pending, "leased": st.Leased, "dead": st.Dead,
			"oldest_pending_ms": st.OldestPending.Milliseconds(), "by_type": byType(st.ByType), "consumers": consumers,
		})
	}
	c.printStats(st)
	c.printConsumers(consumers)
	return exitOK
}

// consumerStats reads every named consumer's backlog.
func (c *cli) consumerStats() ([]consumerStats, error) {
	infos, err := call(c, c.store.Consumers)
	if err != nil {
		return nil, err
	}
	consumers := make([]consumerStats, 0, len(infos))
	for _, info := range infos {
		cs, err := c.store.ConsumerQueue(info.Name)
		if err != nil {
			return nil, err
		}
		cst, err := call(c, cs.Stats)
		if errors.Is(err, backend.ErrUnknownConsumer) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		consumers = append(consumers, consumerStats{
			Name: info.Name, StartSeq: info.StartSeq, Backfilling: info.Backfilling, BackfillAt: info.BackfillAt,
			Pending: cst.Pending, Leased: cst.Leased, Dead: cst.Dead, OldestPendingMS: cst.OldestPending.Milliseconds(), ByType: byType(cst.ByType),
		})
	}
	return consumers, nil
}

// printStats prints the default consumer's backlog and its types.
func (c *cli) printStats(st backend.Stats) {
	fmt.Fprintf(c.out, "table %s: %d pending (%d leased), %d dead, oldest pending %s\n",
		c.table, st.Pending, st.Leased, st.Dead, age(st.OldestPending))
	if len(st.ByType) > 0 {
		tw := c.newTable("TYPE", "PENDING", "DEAD")
		types := make([]string, 0, len(st.ByType))
		for t := range st.ByType {
			types = append(types, t)
		}
		sort.Strings(types)
		for _, t := range types {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", short(t, 40), st.ByType[t].Pending, st.ByType[t].Dead)
		}
		_ = tw.Flush()
	}
}

// printConsumers prints the named consumers' backlogs as a table.
func (c *cli) printConsumers(consumers []consumerStats) {
	if len(consumers) == 0 {
		return
	}
	fmt.Fprintln(c.out, "named consumers:")
	tw := c.newTable("CONSUMER", "START", "PENDING", "LEASED", "DEAD", "OLDEST PENDING")
	for _, cs := range consumers {
		start := fmt.Sprintf("seq %d", cs.StartSeq)
		if cs.Backfilling {
			start = fmt.Sprintf("backfilling, at seq %d", cs.BackfillAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", cs.Name, start, cs.Pending, cs.Leased, cs.Dead, age(time.Duration(cs.OldestPendingMS)*time.Millisecond))
	}
	_ = tw.Flush()
}

// listLimitMax bounds a page.
const listLimitMax = 1000

func runList(c *cli, args []string) int {
	fs := c.flags("[--status pending|published|dead] [--type T] [--key K] [--limit N] [--after SEQ] [--json]")
	status := fs.String("status", "", "only records with this status: pending, published or dead")
	typ := fs.String("type", "", "only records of this event type")
	key := fs.String("key", "", "only records with this key")
	limit := fs.Int("limit", 50, fmt.Sprintf("records per page, 1 to %d", listLimitMax))
	after := fs.Int64("after", 0, "page: only records after this SEQ (the last SEQ of the previous page)")
	if code, ok := c.parseNoArgs(fs, args, c.tableInDB); !ok {
		return code
	}
	statuses := []string{string(outbox.StatusPending), string(outbox.StatusPublished), string(outbox.StatusDead)}
	switch {
	case *status != "" && !slices.Contains(statuses, *status):
		return c.usageError("--status %q: must be pending, published or dead%s", safe(*status, false), didYouMean(*status, "", statuses))
	case *limit < 1 || *limit > listLimitMax:
		return c.usageError("--limit %d: must be 1 to %d", *limit, listLimitMax)
	case *after < 0:
		return c.usageError("--after %d: must not be negative (0, the default, starts at the first record)", *after)
	}
	if code, ok := c.connect(); !ok {
		return code
	}
	defer c.close()
	recs, err := call(c, func(ctx context.Context) ([]outbox.Record, error) {
		return c.store.List(ctx, backend.ListFilter{Status: outbox.Status(*status), Type: *typ, Key: *key, AfterSeq: *after, Limit: *limit})
	})
	if err != nil {
		return c.fail(exitFailed, err)
	}
	var next int64
	if len(recs) == *limit {
		next = recs[len(recs)-1].Seq
	}
	if c.json {
		out := make([]jsonRecord, len(recs))
		for i, r := range recs {
			out[i] = toJSON(r, false)
		}
		return c.printJSON(map[string]any{"records": out, "next_after": next})
	}
	tw := c.newTable("SEQ", "EVENT_ID", "TYPE", "KEY", "STATUS", "RETRIES", "CREATED", "LAST_ERROR")
	for _, r := range recs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Seq, short(r.ID, 40), short(r.Type, 24), short(r.Key, 24),
			r.Status, r.Attempts, r.CreatedAt.Format(time.DateTime), short(r.LastError, 60))
	}
	_ = tw.Flush()
	if next > 0 {
		fmt.Fprintf(c.out, "next page: --after %d\n", next)
	}
	return exitOK
}

// maxShown bounds the payload printed without --full.
const maxShown = 4096

func runShow(c *cli, args []string) int {
	fs := c.flags("ID [--consumer NAME] [--full] [--json]")
	full := fs.Bool("full", false, fmt.Sprintf("print the whole payload (default: the first %d bytes)", maxShown))
	c.addConsumerFlag(fs)
	if code, ok := c.parse(fs, args); !ok {
		return code
	}
	switch {
	case len(c.args) == 0:
		return c.usageError("show takes an event ID: outboxctl show EVENT_ID")
	case len(c.args) > 1:
		return c.extraArgs("show takes one event ID", c.args, c.tableInDB)
	}
	st, where, code, ok := c.connectState()
	if !ok {
		return code
	}
	defer c.close()
	r, err := call(c, func(ctx context.Context) (outbox.Record, error) { return st.Get(ctx, c.args[0]) })
	switch {
	case errors.Is(err, outbox.ErrNotFound), errors.Is(err, backend.ErrUnknownConsumer):
		return c.fail(exitNotFound, fmt.Errorf("no record with event ID %q in %s: %w", safe(c.args[0], false), where, err))
	case err != nil && r.ID == "":
		return c.fail(exitFailed, err)
	case err != nil:
		c.warn(err) // undecodable: show what could be read
	}
	if c.json {
		return c.printJSON(toJSON(r, *full))
	}
	tw := c.newTable("FIELD", "VALUE")
	for _, f := range [][2]string{
		{"event_id", safe(r.ID, false)}, {"seq", strconv.FormatInt(r.Seq, 10)}, {"type", safe(r.Type, false)},
		{"key", safe(r.Key, false)}, {"status", string(r.Status)}, {"retry_count", strconv.Itoa(r.Attempts)},
		{"last_error", safe(r.LastError, false)}, {"created_at", r.CreatedAt.Format(time.RFC3339Nano)},
		{"enqueued_at", formatTime(r.EnqueuedAt)},
		{"next_attempt_at", r.NextAttemptAt.Format(time.RFC3339Nano)}, {"published_at", formatTime(r.PublishedAt)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", f[0], f[1])
	}
	keys := make([]string, 0, len(r.Headers))
	for k := range r.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(tw, "header %s\t%s\n", safe(k, false), safe(r.Headers[k], false))
	}
	_ = tw.Flush()
	fmt.Fprintf(c.out, "payload (%d bytes):\n%s\n", len(r.Payload), showPayload(r.Payload, *full))
	return exitOK
}

// showPayload renders a payload for a terminal: indented JSON, or text,
// with control characters escaped; binary as hex. Cut unless full.
func showPayload(p []byte, full bool) string {
	cut := ""
	if !full && len(p) > maxShown {
		p, cut = p[:maxShown], fmt.Sprintf("\n… %d more bytes (--full shows them)", len(p)-maxShown)
	}
	var pretty bytes.Buffer
	switch {
	case json.Valid(p) && json.Indent(&pretty, p, "", "  ") == nil:
		return safe(pretty.String(), true) + cut
	case utf8.Valid(p):
		return safe(string(p), true) + cut
	}
	return fmt.Sprintf("(binary) % x", p) + cut
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339Nano)
}

// jsonRecord is a record as --json prints it. The payload is a string
// when it is UTF-8 text, else base64.
type jsonRecord struct {
	Seq           int64             `json:"seq"`
	EventID       string            `json:"event_id"`
	Type          string            `json:"event_type"`
	Key           string            `json:"event_key"`
	Status        outbox.Status     `json:"status"`
	RetryCount    int               `json:"retry_count"`
	LastError     string            `json:"last_error,omitempty"`
	CreatedAt     time.Time         `json:"created_at"`
	EnqueuedAt    time.Time         `json:"enqueued_at"`
	NextAttemptAt time.Time         `json:"next_attempt_at"`
	PublishedAt   *time.Time        `json:"published_at,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	Payload       *string           `json:"payload,omitempty"`
	PayloadBase64 []byte            `json:"payload_base64,omitempty"`
	PayloadBytes  int               `json:"payload_bytes"`
}

func toJSON(r outbox.Record, withPayload bool) jsonRecord {
	j := jsonRecord{Seq: r.Seq, EventID: r.ID, Type: r.Type, Key: r.Key, Status: r.Status, RetryCount: r.Attempts,
		LastError: r.LastError, CreatedAt: r.CreatedAt, EnqueuedAt: r.EnqueuedAt, NextAttemptAt: r.NextAttemptAt, Headers: r.Headers, PayloadBytes: len(r.Payload)}
	if !r.PublishedAt.IsZero() {
		j.PublishedAt = &r.PublishedAt
	}
	if withPayload || len(r.Payload) <= maxShown {
		if utf8.Valid(r.Payload) {
			s := string(r.Payload)
			j.Payload = &s
		} else {
			j.PayloadBase64 = r.Payload
		}
	}
	return j
}
