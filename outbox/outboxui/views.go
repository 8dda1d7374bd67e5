package outboxui

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// outboxView is what the overview shows of one outbox.
type outboxView struct {
	Name    string
	LastSeq int64
	At      time.Time
	Queues  []queueView
}

// queueView is one consumer's line of the overview.
type queueView struct {
	Outbox, Consumer string
	Pending          int
	Leased           int
	Dead             int
	Oldest           time.Duration
	// Head is the oldest pending record (nil: none, or not readable).
	Head *outbox.Record
	// Err is why the figures could not be read ("" when they were).
	Err string
}

// label names the queue for people.
func (q queueView) label() string {
	if q.Consumer == "" {
		return q.Outbox
	}
	return q.Outbox + " / " + q.Consumer
}

// readOutbox reads the figures of every consumer of ob; with heads, each
// one's oldest pending record too.
func (h *Handler) readOutbox(ctx context.Context, ob Outbox, heads bool) (outboxView, error) {
	ctx, cancel := h.withTimeout(ctx)
	defer cancel()
	v := outboxView{Name: ob.Name(), At: time.Now()}
	var err error
	if v.LastSeq, err = ob.LastSeq(ctx); err != nil {
		return v, err
	}
	consumers, err := consumerNames(ctx, ob)
	if err != nil {
		return v, err
	}
	for _, name := range append([]string{""}, consumers...) {
		v.Queues = append(v.Queues, h.readQueue(ctx, ob, name, heads))
	}
	return v, nil
}

// readQueue reads one consumer's figures; a failure is shown in its
// line.
func (h *Handler) readQueue(ctx context.Context, ob Outbox, consumer string, heads bool) queueView {
	qv := queueView{Outbox: ob.Name(), Consumer: consumer}
	q, err := ob.ConsumerQueue(consumer)
	if err != nil {
		qv.Err = err.Error()
		return qv
	}
	st, err := q.Stats(ctx)
	if err != nil {
		qv.Err = err.Error()
		return qv
	}
	qv.Pending, qv.Leased, qv.Dead, qv.Oldest = st.Pending, st.Leased, st.Dead, st.OldestPending
	if heads && st.Pending > 0 {
		recs, err := q.List(ctx, backend.ListFilter{Status: outbox.StatusPending, Limit: 1})
		switch {
		case err != nil:
			qv.Err = "oldest pending record: " + err.Error()
		case len(recs) == 1:
			qv.Head = &recs[0]
		}
	}
	return qv
}

// sharedRead is the overview's figures as last read, shared by every
// request within Refresh/2 of that read. Each open overview polls every
// Refresh; without it, ten open tabs would count every queue's backlog
// ten times as often, and on a large backlog each count is a range scan.
type sharedRead struct {
	mu    sync.Mutex
	at    time.Time
	views []queueView // nil: nothing to share
}

// readAllShared is readAll, or its result of less than Refresh/2 ago.
// Concurrent callers wait for one read. A read cut short by its caller's
// context is not shared.
func (h *Handler) readAllShared(ctx context.Context) []queueView {
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	if h.shared.views != nil && time.Since(h.shared.at) < h.opts.Refresh/2 {
		return slices.Clone(h.shared.views)
	}
	views := h.readAll(ctx)
	h.shared.views = nil
	if ctx.Err() == nil {
		h.shared.at, h.shared.views = time.Now(), views
	}
	return slices.Clone(views)
}

// forgetShared drops the shared figures, so that the next overview reads
// afresh (after a requeue, say).
func (h *Handler) forgetShared() {
	h.shared.mu.Lock()
	h.shared.views = nil
	h.shared.mu.Unlock()
}

// readAll reads every outbox, the worst queue first: those that cannot
// be read, then by the oldest pending age, then by the most dead letters.
// An outbox that cannot be read shows as one line with its error.
func (h *Handler) readAll(ctx context.Context) []queueView {
	var all []queueView
	for _, ob := range h.opts.Outboxes {
		v, err := h.readOutbox(ctx, ob, true)
		if err != nil {
			h.opts.Logger.WarnContext(ctx, "outboxui: overview", "outbox", ob.Name(), "error", err)
			all = append(all, queueView{Outbox: ob.Name(), Err: err.Error()})
			continue
		}
		all = append(all, v.Queues...)
	}
	slices.SortStableFunc(all, func(a, b queueView) int {
		return cmp.Or(cmp.Compare(failed(b), failed(a)), cmp.Compare(b.Oldest, a.Oldest), cmp.Compare(b.Dead, a.Dead))
	})
	return all
}

// failed is 1 for a queue that could not be read, for sorting.
func failed(q queueView) int {
	if q.Err != "" {
		return 1
	}
	return 0
}

// outboxNamed returns the outbox called name.
func (h *Handler) outboxNamed(name string) (Outbox, bool) {
	for _, ob := range h.opts.Outboxes {
		if ob.Name() == name {
			return ob, true
		}
	}
	return nil, false
}

// errBadRequest marks a request the user can correct.
var errBadRequest = errors.New("bad request")

// queueOf returns the queue a request names with ?outbox= and
// ?consumer=.
func (h *Handler) queueOf(vals url.Values) (Outbox, Queue, error) {
	ob, ok := h.outboxNamed(vals.Get("outbox"))
	if !ok {
		return nil, nil, fmt.Errorf("%w: no outbox %q here", errBadRequest, vals.Get("outbox"))
	}
	q, err := ob.ConsumerQueue(vals.Get("consumer"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	return ob, q, nil
}

// filteredQueue reads the filter a request carries (parseFilter) and the
// queue it names (queueOf).
func (h *Handler) filteredQueue(vals url.Values) (filter, Outbox, Queue, error) {
	f, err := parseFilter(vals)
	if err != nil {
		return f, nil, nil, err
	}
	ob, q, err := h.queueOf(vals)
	return f, ob, q, err
}

// Views of the records page.
const (
	viewDead    = "dead"
	viewFailing = "failing"
	viewPending = "pending"
)

// filter is the records page's filter, as the form and the links carry
// it.
type filter struct {
	Outbox, Consumer string
	View             string
	Type, Key, Error string
	// Older is a duration as Go writes it ("90m", "2h").
	Older     string
	olderThan time.Duration
}

// parseFilter reads a filter from a query or a form.
func parseFilter(vals url.Values) (filter, error) {
	f := filter{
		Outbox: vals.Get("outbox"), Consumer: vals.Get("consumer"), View: cmp.Or(vals.Get("view"), viewDead),
		Type: vals.Get("type"), Key: vals.Get("key"), Error: vals.Get("error"), Older: strings.TrimSpace(vals.Get("older")),
	}
	switch f.View {
	case viewDead, viewFailing, viewPending:
	default:
		return f, fmt.Errorf("%w: view %q: must be dead, failing or pending", errBadRequest, f.View)
	}
	if f.Older != "" {
		d, err := time.ParseDuration(f.Older)
		if err != nil || d < 0 {
			return f, fmt.Errorf("%w: older than %q: want a duration such as 90s, 15m or 2h", errBadRequest, f.Older)
		}
		f.olderThan = d
	}
	return f, nil
}

// list is the store filter of f's records after seq.
func (f filter) list(after int64, limit int) backend.ListFilter {
	lf := backend.ListFilter{Type: f.Type, Key: f.Key, ErrorContains: f.Error, OlderThan: f.olderThan, AfterSeq: after, Limit: limit}
	switch f.View {
	case viewDead:
		lf.Status = outbox.StatusDead
	case viewFailing:
		lf.Status, lf.MinAttempts = outbox.StatusPending, 1
	case viewPending:
		lf.Status = outbox.StatusPending
	}
	return lf
}

// dead is the store filter of f's dead letters.
func (f filter) dead() backend.DeadFilter {
	return backend.DeadFilter{Type: f.Type, Key: f.Key, ErrorContains: f.Error, OlderThan: f.olderThan}
}

// values is f as query parameters, with extra pairs after it.
func (f filter) values(extra ...string) url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{
		{"outbox", f.Outbox}, {"consumer", f.Consumer}, {"view", f.View},
		{"type", f.Type}, {"key", f.Key}, {"error", f.Error}, {"older", f.Older},
	} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v
}

// describe says in words what f matches.
func (f filter) describe() string {
	var parts []string
	for _, kv := range [][2]string{{"type", f.Type}, {"key", f.Key}, {"error contains", f.Error}, {"older than", f.Older}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+strconv.Quote(kv[1]))
		}
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, ", ")
}

// inputNote warns, when a text value of f holds characters that the
// filter form's inputs cannot keep, that pressing Filter would change
// it; the page's links and buttons carry it exactly. "" otherwise.
func (f filter) inputNote() string {
	var names []string
	for _, kv := range [][2]string{{"type", f.Type}, {"key", f.Key}, {"error contains", f.Error}} {
		if inputCannotKeep(kv[1]) {
			names = append(names, kv[0])
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "The " + strings.Join(names, " and ") + " filter holds characters that the fields above cannot show as they are " +
		"(NUL, CR, LF, or bytes that are not UTF-8): the links and buttons of this page keep the filter exactly, the Filter button would change it."
}

// recordURL links the record page of id in a queue.
func (h *Handler) recordURL(ob, consumer, id string) string {
	v := url.Values{"outbox": {ob}, "id": {id}}
	if consumer != "" {
		v.Set("consumer", consumer)
	}
	return h.opts.Path + "record?" + v.Encode()
}

// recordsURL links the records page of f.
func (h *Handler) recordsURL(f filter, extra ...string) string {
	return h.opts.Path + "records?" + f.values(extra...).Encode()
}
