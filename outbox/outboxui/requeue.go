package outboxui

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// Scopes of a requeue.
const (
	scopeOne      = "one"
	scopeSelected = "selected"
	scopeFilter   = "filter"
)

// maxFormBytes bounds a POST body.
const maxFormBytes = 1 << 20

// confirmData is the confirmation page's content.
type confirmData struct {
	Filter   filter
	Label    string
	Scope    string
	IDs      []string // as stored; the hidden fields encode them
	Shown    []string // escaped and cut, for the list
	More     int
	Count    int
	Describe string
	BackURL  string
}

// requeue handles the requeue form: without confirm=yes it shows what
// would be requeued and asks; with it, it requeues and goes back to the
// dead letters. A requeue of a filter's matches requeues at most the
// count that was confirmed, oldest first.
func (h *Handler) requeue(w http.ResponseWriter, r *http.Request) {
	if h.opts.ReadOnly {
		h.fail(w, r, http.StatusForbidden, "this dashboard is read-only: actions are switched off")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "cannot read the form")
		return
	}
	if err := h.checkPost(r); err != nil {
		h.opts.Logger.WarnContext(r.Context(), "outboxui: POST refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"), "error", err)
		h.fail(w, r, http.StatusForbidden, err.Error())
		return
	}
	form, err := decodeForm(r.PostForm)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	f, _, queue, err := h.filteredQueue(form)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d := confirmData{Filter: f, Label: queueView{Outbox: f.Outbox, Consumer: f.Consumer}.label(), Scope: form.Get("scope"), Describe: f.describe()}
	switch d.Scope {
	case scopeOne, scopeSelected:
		d.IDs = distinct(form["id"])
		if len(d.IDs) == 0 || len(d.IDs) > MaxPageSize || (d.Scope == scopeOne && len(d.IDs) != 1) {
			h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("select 1 to %d records to requeue", MaxPageSize))
			return
		}
	case scopeFilter:
	default:
		h.fail(w, r, http.StatusBadRequest, fmt.Sprintf("scope %q: must be one, selected or filter", d.Scope))
		return
	}
	if form.Get("confirm") != "yes" {
		h.confirm(w, r, queue, d)
		return
	}
	h.doRequeue(w, r, queue, d, atoi(form.Get("count")))
}

// confirm shows how many records the requeue would touch and asks.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request, queue Queue, d confirmData) {
	d.BackURL = h.recordsURL(d.Filter)
	if d.Scope == scopeFilter {
		ctx, cancel := h.withTimeout(r.Context())
		defer cancel()
		n, err := queue.CountDead(ctx, d.Filter.dead())
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		d.Count = n
	} else {
		d.Count = len(d.IDs)
		for i, id := range d.IDs {
			if i == 20 {
				d.More = len(d.IDs) - i
				break
			}
			d.Shown = append(d.Shown, shown(id, 80))
		}
		if d.Scope == scopeOne {
			d.BackURL = h.recordURL(d.Filter.Outbox, d.Filter.Consumer, d.IDs[0])
		}
	}
	h.render(w, r, http.StatusOK, "confirm", "Requeue?", d)
}

// doRequeue requeues what d names (at most limit records of a filter)
// and sends the browser back to the dead letters.
func (h *Handler) doRequeue(w http.ResponseWriter, r *http.Request, queue Queue, d confirmData, limit int) {
	ctx := r.Context()
	defer h.forgetShared() // the overview shows the requeued records at once
	var done, skipped int
	switch d.Scope {
	case scopeFilter:
		if limit < 1 {
			h.fail(w, r, http.StatusBadRequest, "nothing was confirmed: the count is missing")
			return
		}
		n, err := queue.RequeueDead(ctx, d.Filter.dead(), backend.RequeueOptions{BatchSize: h.opts.RequeueBatch, Limit: limit})
		done, skipped = n, limit-n
		if err != nil {
			h.fail(w, r, http.StatusInternalServerError, fmt.Sprintf("requeued %d, then: %v", n, err))
			return
		}
	default:
		for _, id := range d.IDs {
			cctx, cancel := h.withTimeout(ctx)
			err := queue.Requeue(cctx, id)
			cancel()
			switch {
			case err == nil:
				done++
			case errors.Is(err, backend.ErrNotDead), errors.Is(err, outbox.ErrNotFound):
				skipped++
			default:
				h.fail(w, r, http.StatusInternalServerError, fmt.Sprintf("requeued %d, then: %v", done, err))
				return
			}
		}
	}
	h.opts.Logger.InfoContext(ctx, "outboxui: requeued", "outbox", d.Filter.Outbox, "consumer", d.Filter.Consumer,
		"scope", d.Scope, "filter", d.Describe, "requeued", done, "skipped", skipped, "remote_addr", r.RemoteAddr)
	back := d.Filter
	back.View = viewDead
	http.Redirect(w, r, h.recordsURL(back, "requeued", strconv.Itoa(done), "skipped", strconv.Itoa(skipped)), http.StatusSeeOther)
}

// distinct returns ids without repeats or empty ones, in order.
func distinct(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}
