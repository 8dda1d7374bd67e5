package outboxui

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// page is what every template gets.
type page struct {
	Title    string
	Base     string
	CSRF     string
	ReadOnly bool
	Refresh  int64 // milliseconds
	Data     any
}

// render writes page name with status.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	p := page{Title: title, Base: h.opts.Path, CSRF: h.token(h.session(w, r)), ReadOnly: h.opts.ReadOnly, Refresh: h.opts.Refresh.Milliseconds(), Data: data}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := h.pages[name].ExecuteTemplate(w, "layout", p); err != nil {
		h.opts.Logger.ErrorContext(r.Context(), "outboxui: render", "page", name, "error", err)
	}
}

// fail shows an error page. Store errors are logged and shown: they say
// what is wrong with the table, and hold no secrets.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if status >= 500 {
		h.opts.Logger.ErrorContext(r.Context(), "outboxui: request failed", "path", r.URL.Path, "error", msg)
	}
	h.render(w, r, status, "error", http.StatusText(status), msg)
}

// failErr shows err with the status its kind calls for.
func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errBadRequest):
		h.fail(w, r, http.StatusBadRequest, err.Error())
	case errors.Is(err, outbox.ErrNotFound), errors.Is(err, backend.ErrUnknownConsumer):
		h.fail(w, r, http.StatusNotFound, err.Error())
	default:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
	}
}

// overviewData is the overview page's and its JSON's content.
type overviewData struct {
	At     time.Time   `json:"-"`
	Queues []queueCard `json:"queues"`
}

// queueCard is one queue on the overview.
type queueCard struct {
	ID         string `json:"id"`
	Label      string `json:"label"`
	Pending    int    `json:"pending"`
	Leased     int    `json:"leased"`
	Dead       int    `json:"dead"`
	OldestMS   int64  `json:"oldest_ms"`
	Oldest     string `json:"oldest"`
	Head       *head  `json:"head"`
	Written    string `json:"written"`
	Done       string `json:"done"`
	Spark      string `json:"spark"`
	Err        string `json:"error"`
	DeadURL    string `json:"dead_url"`
	FailingURL string `json:"failing_url"`
	Level      string `json:"level"`
}

// head is the oldest pending record of a queue, as the overview shows
// it.
type head struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Key       string `json:"key"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error"`
	URL       string `json:"url"`
}

// overviewOf reads the overview.
func (h *Handler) overviewOf(r *http.Request) overviewData {
	d := overviewData{At: time.Now()}
	for _, q := range h.readAllShared(r.Context()) {
		c := queueCard{
			ID: q.Outbox + "/" + q.Consumer, Label: q.label(), Pending: q.Pending, Leased: q.Leased, Dead: q.Dead,
			OldestMS: q.Oldest.Milliseconds(), Oldest: age(q.Oldest), Err: q.Err,
		}
		f := filter{Outbox: q.Outbox, Consumer: q.Consumer, View: viewDead}
		c.DeadURL = h.recordsURL(f)
		f.View = viewFailing
		c.FailingURL = h.recordsURL(f)
		if q.Head != nil {
			c.Head = &head{
				ID: shown(q.Head.ID, 80), Type: shown(q.Head.Type, 80), Key: shown(q.Head.Key, 80), Attempts: q.Head.Attempts,
				LastError: shown(q.Head.LastError, 300), URL: h.recordURL(q.Outbox, q.Consumer, q.Head.ID),
			}
		}
		t := h.hist.throughput(queueID{q.Outbox, q.Consumer})
		c.Written, c.Done = "…", "…"
		if t.Known {
			c.Written, c.Done = perMinute(t.WrittenPerMin), perMinute(t.DonePerMin)
		}
		c.Spark = sparkline(t.Done)
		c.Level = level(q)
		d.Queues = append(d.Queues, c)
	}
	return d
}

// level grades a queue for the eye: "bad" with dead letters or a head a
// minute old, "warn" with a head ten seconds old, else "ok".
func level(q queueView) string {
	switch {
	case q.Err != "" || q.Dead > 0 || q.Oldest >= time.Minute:
		return "bad"
	case q.Oldest >= 10*time.Second:
		return "warn"
	}
	return "ok"
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "overview", "Outbox overview", h.overviewOf(r))
}

// overviewJSON is the overview's figures for the page's live refresh.
func (h *Handler) overviewJSON(w http.ResponseWriter, r *http.Request) {
	d := h.overviewOf(r)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{"at": d.At.UTC().Format(time.RFC3339), "queues": d.Queues})
}

// recordsData is the records page's content.
type recordsData struct {
	Filter    filter
	Label     string
	Consumers []string
	Records   []recordRow
	NextURL   string
	FirstURL  string
	Requeued  string
	Err       string
	FormURL   string
	// FilterNote says which filter values the filter form cannot
	// show as they are ("" when it can show them all).
	FilterNote string
}

// recordRow is one line of the records page.
type recordRow struct {
	Seq                  int64
	ID, Type, Key, Error string
	RawID                string
	Attempts             int
	Age                  string
	URL                  string
	Dead                 bool
}

func (h *Handler) records(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, ob, queue, err := h.filteredQueue(q)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	after, err := strconv.ParseInt(cmp.Or(q.Get("after"), "0"), 10, 64)
	if err != nil || after < 0 {
		h.fail(w, r, http.StatusBadRequest, "after: want a sequence number")
		return
	}
	ctx, cancel := h.withTimeout(r.Context())
	defer cancel()
	d := recordsData{Filter: f, Label: queueView{Outbox: f.Outbox, Consumer: f.Consumer}.label(), FormURL: h.opts.Path + "records", FilterNote: f.inputNote()}
	if d.Consumers, err = consumerNames(ctx, ob); err != nil {
		h.failErr(w, r, err)
		return
	}
	recs, err := queue.List(ctx, f.list(after, h.opts.PageSize))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	now := time.Now()
	for _, rec := range recs {
		d.Records = append(d.Records, recordRow{
			Seq: rec.Seq, ID: shown(rec.ID, 60), RawID: rec.ID, Type: shown(rec.Type, 40), Key: shown(rec.Key, 40),
			Error: shown(rec.LastError, 160), Attempts: rec.Attempts, Age: age(now.Sub(rec.EnqueuedAt)),
			URL: h.recordURL(f.Outbox, f.Consumer, rec.ID), Dead: rec.Status == outbox.StatusDead,
		})
	}
	if len(recs) == h.opts.PageSize {
		d.NextURL = h.recordsURL(f, "after", strconv.FormatInt(recs[len(recs)-1].Seq, 10))
	}
	if after > 0 {
		d.FirstURL = h.recordsURL(f)
	}
	if n := q.Get("requeued"); n != "" {
		d.Requeued = fmt.Sprintf("Requeued %d dead letter(s); %d skipped (no longer dead or gone).", atoi(n), atoi(q.Get("skipped")))
	}
	h.render(w, r, http.StatusOK, "records", d.Label+": "+f.View, d)
}

// recordData is the record page's content.
type recordData struct {
	Outbox, Consumer string
	Label            string
	Rec              outbox.Record
	ID, Type, Key    string
	LastError        string
	Headers          [][2]string
	Payload          string
	PayloadNote      string
	States           []consumerState
	DecodeErr        string
}

// consumerState is a message's delivery state in one consumer.
type consumerState struct {
	Consumer, Label string
	Status          string
	Attempts        int
	LastError       string
	Next            string
	Dead            bool
	Err             string
}

func (h *Handler) record(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ob, queue, err := h.queueOf(q)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	id := q.Get("id")
	ctx, cancel := h.withTimeout(r.Context())
	defer cancel()
	rec, err := queue.Get(ctx, id)
	d := recordData{Outbox: ob.Name(), Consumer: q.Get("consumer"), Label: queueView{Outbox: ob.Name(), Consumer: q.Get("consumer")}.label()}
	switch {
	case err != nil && rec.ID == "":
		h.failErr(w, r, err)
		return
	case err != nil:
		d.DecodeErr = err.Error() // undecodable: show what could be read
	}
	d.Rec, d.ID, d.Type, d.Key, d.LastError = rec, shown(rec.ID, 1000), shown(rec.Type, 1000), shown(rec.Key, 1000), safeLines(rec.LastError)
	keys := make([]string, 0, len(rec.Headers))
	for k := range rec.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		d.Headers = append(d.Headers, [2]string{shown(k, 200), shown(rec.Headers[k], 2000)})
	}
	d.Payload, d.PayloadNote = showPayload(rec.Payload, h.opts.MaxPayloadShown)
	d.States = h.states(ctx, ob, id)
	h.render(w, r, http.StatusOK, "record", "Record "+shown(rec.ID, 60), d)
}

// states reads the message's state in every consumer of ob.
func (h *Handler) states(ctx context.Context, ob Outbox, id string) []consumerState {
	consumers, err := consumerNames(ctx, ob)
	if err != nil {
		return []consumerState{{Label: "named consumers", Err: err.Error()}}
	}
	var out []consumerState
	for _, c := range append([]string{""}, consumers...) {
		s := consumerState{Consumer: c, Label: cmp.Or(c, "default consumer")}
		q, err := ob.ConsumerQueue(c)
		if err == nil {
			var rec outbox.Record
			rec, err = q.Get(ctx, id)
			s.Status, s.Attempts, s.LastError, s.Dead = string(rec.Status), rec.Attempts, shown(rec.LastError, 300), rec.Status == outbox.StatusDead
			if !rec.NextAttemptAt.IsZero() && rec.Status == outbox.StatusPending {
				s.Next = rec.NextAttemptAt.UTC().Format(time.RFC3339)
			}
		}
		switch {
		case errors.Is(err, outbox.ErrNotFound):
			s.Status = "not for this consumer"
		case err != nil && s.Status == "":
			s.Err = err.Error()
		}
		out = append(out, s)
	}
	return out
}
