package outboxui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// Hostile values: markup, attribute breakers, control characters.
const (
	scriptText = `<script>alert(1)</script>`
	attrBreak  = `"'><img src=x onerror=alert(1)>`
)

// fixture is a migrated outbox table with a named consumer.
type fixture struct {
	db    *testutil.Database
	store *mysql.Store
	audit *mysql.ConsumerStore
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s, err := mysql.New(d.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.AddConsumer(ctx, "audit", backend.StartNow))
	audit, err := s.Consumer("audit")
	require.NoError(t, err)
	return fixture{db: d, store: s, audit: audit}
}

// newDeadFixture is newFixture with one dead letter, "d".
func newDeadFixture(t *testing.T) fixture {
	t.Helper()
	f := newFixture(t)
	f.enqueue(t, outbox.Message{ID: "d", Type: "T"})
	settle(t, f.store, dead("d", "x"))
	return f
}

func (f fixture) enqueue(t *testing.T, msgs ...outbox.Message) {
	t.Helper()
	require.NoError(t, f.store.Enqueue(context.Background(), f.db.DB, nil, msgs...))
}

// settle claims the outcomes' records from q and settles them.
func settle(t *testing.T, q backend.Store, outcomes ...backend.Outcome) {
	t.Helper()
	ids := make([]string, len(outcomes))
	for i, o := range outcomes {
		ids[i] = o.ID
	}
	ctx := context.Background()
	b, err := q.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: len(ids), LeaseFor: time.Minute, IDs: ids})
	require.NoError(t, err)
	require.Len(t, b.Records, len(ids))
	_, err = q.Settle(ctx, b.Token, outcomes)
	require.NoError(t, err)
}

func dead(id, errText string) backend.Outcome {
	return backend.Outcome{ID: id, Kind: backend.OutcomeDead, Error: errText}
}

// client is a browser: a cookie jar and the server's origin.
type client struct {
	t    *testing.T
	srv  *httptest.Server
	http *http.Client
	ui   *Handler
}

func newClient(t *testing.T, f fixture, opts Options) *client {
	t.Helper()
	if opts.Outboxes == nil {
		opts.Outboxes = []Outbox{f.store}
	}
	opts.Logger = outboxtest.Logger(t)
	ui, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ui.Close()) })
	srv := httptest.NewServer(ui)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &client{t: t, srv: srv, ui: ui, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type response struct {
	code   int
	header http.Header
	body   string
}

// do sends req. It is safe for concurrent use: a failure is reported
// with Errorf (not FailNow, which only the test's goroutine may call).
func (c *client) do(req *http.Request) response {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Errorf("%s %s: %v", req.Method, req.URL, err)
		return response{header: http.Header{}}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Errorf("%s %s: read: %v", req.Method, req.URL, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (c *client) get(path string) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.srv.URL+path, nil)
	require.NoError(c.t, err)
	return c.do(req)
}

// post sends a form from the handler's own origin.
func (c *client) post(path string, form url.Values) response {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.srv.URL+path, strings.NewReader(form.Encode()))
	require.NoError(c.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.srv.URL)
	return c.do(req)
}

// pageForm is form as the dashboard's pages write it: the values from
// the database (id, type, key, error) encoded.
func pageForm(form url.Values) url.Values {
	for _, name := range encodedFields {
		for i, v := range form[name] {
			form[name][i] = encodeField(v)
		}
	}
	return form
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token off a page that has a form.
func (c *client) csrf(page string) string {
	c.t.Helper()
	m := csrfRE.FindStringSubmatch(c.get(page).body)
	require.NotNil(c.t, m, "no CSRF token on %s", page)
	return m[1]
}

func statusOf(t *testing.T, q Queue, id string) outbox.Status {
	t.Helper()
	r, err := q.Get(context.Background(), id)
	require.NoError(t, err)
	return r.Status
}

func TestOptions(t *testing.T) {
	f := newFixture(t)
	ob := f.store
	t.Run("defaults", func(t *testing.T) {
		o := Options{Outboxes: []Outbox{ob}}.withDefaults()
		require.NoError(t, o.validate())
		require.Equal(t, DefaultPath, o.Path)
		require.Equal(t, DefaultPageSize, o.PageSize)
		require.Equal(t, DefaultSampleInterval, o.SampleInterval)
		require.Equal(t, DefaultSamples, o.Samples)
		require.Equal(t, DefaultRefresh, o.Refresh)
		require.Equal(t, DefaultMaxPayloadShown, o.MaxPayloadShown)
		require.Equal(t, DefaultQueryTimeout, o.QueryTimeout)
		require.Equal(t, DefaultRequeueBatch, o.RequeueBatch)
		require.Empty(t, o.AllowedHosts, "loopback only")
		require.NotNil(t, o.Logger)
	})
	t.Run("overrides", func(t *testing.T) {
		in := Options{Outboxes: []Outbox{ob}, Path: "/ops/outbox/", PageSize: 7, SampleInterval: 2 * time.Second, Samples: 3,
			Refresh: time.Second, MaxPayloadShown: 10, QueryTimeout: time.Second, RequeueBatch: 9, CSRFKey: make([]byte, 32),
			AllowedHosts: []string{"dash.example.com", "10.0.0.5"}}
		o := in.withDefaults()
		require.NoError(t, o.validate())
		in.Logger = o.Logger
		require.Equal(t, in, o)
	})
	for _, tc := range []struct {
		name  string
		opts  Options
		field string
	}{
		{"no outbox", Options{}, "Outboxes"},
		{"nil outbox", Options{Outboxes: []Outbox{nil}}, "Outboxes[0]"},
		{"twice", Options{Outboxes: []Outbox{ob, ob}}, "Outboxes[1]"},
		{"path", Options{Outboxes: []Outbox{ob}, Path: "outbox"}, `Path "outbox"`},
		{"path quote", Options{Outboxes: []Outbox{ob}, Path: `/a"b/`}, "Path"},
		{"key", Options{Outboxes: []Outbox{ob}, CSRFKey: []byte("short")}, "CSRFKey"},
		{"page", Options{Outboxes: []Outbox{ob}, PageSize: MaxPageSize + 1}, "PageSize"},
		{"page negative", Options{Outboxes: []Outbox{ob}, PageSize: -1}, "PageSize -1"},
		{"sample", Options{Outboxes: []Outbox{ob}, SampleInterval: time.Millisecond}, "SampleInterval"},
		{"samples", Options{Outboxes: []Outbox{ob}, Samples: 1}, "Samples 1"},
		{"refresh", Options{Outboxes: []Outbox{ob}, Refresh: time.Millisecond}, "Refresh"},
		{"payload", Options{Outboxes: []Outbox{ob}, MaxPayloadShown: -1}, "MaxPayloadShown"},
		{"timeout", Options{Outboxes: []Outbox{ob}, QueryTimeout: -1}, "QueryTimeout"},
		{"batch", Options{Outboxes: []Outbox{ob}, RequeueBatch: backend.MaxRequeueBatch + 1}, "RequeueBatch"},
		{"host", Options{Outboxes: []Outbox{ob}, AllowedHosts: []string{"dash.example.com:9090"}}, `AllowedHosts[0] "dash.example.com:9090"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			require.Error(t, err)
			require.ErrorContains(t, err, "outboxui: "+tc.field)
		})
	}
}

func TestSecurityHeadersAndAssets(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{})
	for _, path := range []string{"/", "/assets/app.js", "/assets/app.css", "/api/overview", "/nope", "/records?outbox=nope"} {
		r := c.get(path)
		require.Contains(t, r.header.Get("Content-Security-Policy"), "default-src 'none'; script-src 'self'; style-src 'self'", path)
		require.Contains(t, r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'", path)
		require.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), path)
		require.Equal(t, "same-origin", r.header.Get("Referrer-Policy"), path)
	}
	require.Equal(t, http.StatusNotFound, c.get("/nope").code)
	require.Equal(t, http.StatusBadRequest, c.get("/records?outbox=nope").code)
	js := c.get("/assets/app.js")
	require.Equal(t, http.StatusOK, js.code)
	require.Contains(t, js.header.Get("Content-Type"), "javascript")
	page := c.get("/").body
	require.NotContains(t, page, "http://", "nothing is loaded from elsewhere")
	require.NotContains(t, page, "https://")
	require.NotRegexp(t, `<script>|\sstyle=|\son[a-z]+=`, page, "no inline script, style or handler (the CSP forbids them)")
}

func TestAuthorize(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{Authorize: func(r *http.Request) error {
		if r.Header.Get("X-Operator") != "alice" {
			return errors.New("not an operator")
		}
		return nil
	}})
	for _, path := range []string{"/", "/api/overview", "/assets/app.js", "/record?outbox=room_outbox&id=x"} {
		r := c.get(path)
		require.Equal(t, http.StatusForbidden, r.code, path)
		require.NotContains(t, r.body, "not an operator", "the reason is logged, not shown")
	}
	req, err := http.NewRequest(http.MethodGet, c.srv.URL+"/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Operator", "alice")
	require.Equal(t, http.StatusOK, c.do(req).code)
}

// TestOverview: per outbox and consumer, the oldest pending age, the
// counts, the record at the head with its last error and a link; the
// JSON the page polls follows the table.
func TestOverview(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{})
	f.enqueue(t,
		outbox.Message{ID: "head-1", Key: "room-9", Type: "RoomGiftSent"},
		outbox.Message{ID: "d-1", Key: "room-1", Type: "RoomUserLeft"},
		outbox.Message{ID: "p-2", Key: "room-2", Type: "RoomUserJoined"},
	)
	settle(t, f.store, backend.Outcome{ID: "head-1", Kind: backend.OutcomeRetry, RetryIn: time.Hour, Error: "tencent im: 10010 group gone"}, dead("d-1", "bad request"))

	page := c.get("/")
	require.Equal(t, http.StatusOK, page.code)
	for _, want := range []string{"room_outbox", "room_outbox / audit", "head-1", "RoomGiftSent", "room-9", "10010 group gone", "oldest pending",
		`href="/record?id=head-1&amp;outbox=room_outbox"`, `href="/records?outbox=room_outbox&amp;view=dead"`} {
		require.Contains(t, page.body, want)
	}

	var got struct {
		Queues []queueCard `json:"queues"`
	}
	r := c.get("/api/overview")
	require.Equal(t, http.StatusOK, r.code)
	require.Contains(t, r.header.Get("Content-Type"), "application/json")
	require.NoError(t, json.Unmarshal([]byte(r.body), &got))
	byID := map[string]queueCard{}
	for _, q := range got.Queues {
		byID[q.ID] = q
	}
	def := byID["room_outbox/"]
	require.Equal(t, 2, def.Pending)
	require.Equal(t, 1, def.Dead)
	require.Equal(t, "bad", def.Level, "a dead letter is bad")
	require.NotNil(t, def.Head)
	require.Equal(t, "head-1", def.Head.ID)
	require.Equal(t, 1, def.Head.Attempts)
	require.Equal(t, "tencent im: 10010 group gone", def.Head.LastError)
	require.Positive(t, def.OldestMS)
	audit := byID["room_outbox/audit"]
	require.Equal(t, 3, audit.Pending, "the audit consumer has not started")
	require.Zero(t, audit.Dead)

	f.enqueue(t, outbox.Message{ID: "p-3", Type: "RoomCreated"})
	outboxtest.Eventually(t, "the JSON is live (read again once Refresh/2 has passed)", func() bool {
		require.NoError(t, json.Unmarshal([]byte(c.get("/api/overview").body), &got))
		for _, q := range got.Queues {
			if q.ID == "room_outbox/" {
				return q.Pending == 3
			}
		}
		return false
	})
}

// countingOutbox counts the Stats calls of its queues.
type countingOutbox struct {
	Outbox
	stats *atomic.Int64
}

func (o countingOutbox) ConsumerQueue(consumer string) (Queue, error) {
	q, err := o.Outbox.ConsumerQueue(consumer)
	return countingQueue{q, o.stats}, err
}

type countingQueue struct {
	Queue
	stats *atomic.Int64
}

func (q countingQueue) Stats(ctx context.Context) (backend.Stats, error) {
	q.stats.Add(1)
	return q.Queue.Stats(ctx)
}

// TestOverviewReadsAreShared: the overviews open at the same time share
// one read of the figures, however many poll; a requeue makes the next
// one read afresh.
func TestOverviewReadsAreShared(t *testing.T) {
	f := newFixture(t)
	var stats atomic.Int64
	ob := countingOutbox{f.store, &stats}
	// The sampler reads every queue once when it starts, then not for an
	// hour; a Refresh of an hour keeps the shared read for half of that.
	c := newClient(t, f, Options{Outboxes: []Outbox{ob}, SampleInterval: time.Hour, Refresh: time.Hour})
	f.enqueue(t, outbox.Message{ID: "d-1", Type: "T"})
	settle(t, f.store, dead("d-1", "bad request"))

	const tabs, queues = 8, 2 // the default consumer and audit
	codes := make([]int, tabs)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = c.get("/api/overview").code
		}()
	}
	wg.Wait()
	for _, code := range codes {
		require.Equal(t, http.StatusOK, code)
	}
	// The sampler, started by the first request, reads each queue once
	// beside the requests: wait for its reads, so that none comes after
	// the poll below.
	outboxtest.Eventually(t, "the sampler's first read of each queue", func() bool { return stats.Load() >= 2*queues })
	require.Equal(t, int64(2*queues), stats.Load(), "%d overviews read the stats %d times: once for the sampler, once shared", tabs, stats.Load())

	before := stats.Load()
	var got struct {
		Queues []queueCard `json:"queues"`
	}
	require.NoError(t, json.Unmarshal([]byte(c.get("/api/overview").body), &got))
	require.Equal(t, before, stats.Load(), "a poll within Refresh/2 reads nothing")
	deadOf := func(id string) int {
		for _, q := range got.Queues {
			if q.ID == id {
				return q.Dead
			}
		}
		t.Fatalf("no queue %s in the overview", id)
		return 0
	}
	require.Equal(t, 1, deadOf("room_outbox/"))

	form := pageForm(url.Values{"csrf": {c.csrf("/records?outbox=room_outbox&view=dead")}, "outbox": {"room_outbox"}, "scope": {"one"}, "id": {"d-1"}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, c.post("/requeue", form).code)
	require.NoError(t, json.Unmarshal([]byte(c.get("/api/overview").body), &got))
	require.Equal(t, before+queues, stats.Load(), "after a requeue the next overview reads again")
	require.Zero(t, deadOf("room_outbox/"), "the requeued record shows at once")
}

// TestThroughput: the sampler's history turns LastSeq and the backlog
// into rates, and keeps at most Samples samples.
func TestThroughput(t *testing.T) {
	h := newHistory(3)
	q := queueID{"o", ""}
	require.False(t, h.throughput(q).Known)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h.add(q, sample{at: t0, seq: 100, pending: 50})
	h.add(q, sample{at: t0.Add(30 * time.Second), seq: 160, pending: 80, dead: 10}) // 60 written, 40 more backlog: 20 done
	h.add(q, sample{at: t0.Add(60 * time.Second), seq: 220, pending: 20, dead: 10}) // 60 written, backlog -60: 120 done
	tp := h.throughput(q)
	require.True(t, tp.Known)
	require.Equal(t, []int64{20, 120}, tp.Done)
	require.InDelta(t, 120, tp.WrittenPerMin, 0.001)
	require.InDelta(t, 140, tp.DonePerMin, 0.001)
	h.add(q, sample{at: t0.Add(90 * time.Second), seq: 220, pending: 20, dead: 10})
	require.Len(t, h.throughput(q).Done, 2, "bounded: three samples")
	h.keep(map[queueID]bool{})
	require.False(t, h.throughput(q).Known, "a removed queue is forgotten")

	f := newFixture(t)
	c := newClient(t, f, Options{})
	c.ui.sampleAll(context.Background())
	f.enqueue(t, outbox.Message{ID: "a", Type: "T"}, outbox.Message{ID: "b", Type: "T"})
	settle(t, f.store, backend.Outcome{ID: "a", Kind: backend.OutcomePublished})
	c.ui.sampleAll(context.Background())
	tp = c.ui.hist.throughput(queueID{"room_outbox", ""})
	require.Equal(t, int64(1), tp.Done[len(tp.Done)-1], "two written, one still pending")
	require.NotEmpty(t, sparkline(tp.Done))
}

// TestCloseStopsTheSampler: no goroutine outlives Close.
func TestCloseStopsTheSampler(t *testing.T) {
	f := newFixture(t)
	ui, err := New(Options{Outboxes: []Outbox{f.store}, Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	require.Nil(t, ui.sampler, "New starts nothing")
	srv := httptest.NewServer(ui)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.NotNil(t, ui.sampler, "the first request starts the sampler")
	require.NoError(t, ui.Close())
	require.NoError(t, ui.Close(), "twice is fine")
	select {
	case <-ui.sampler.done:
	default:
		t.Fatal("the sampler still runs after Close")
	}

	idle, err := New(Options{Outboxes: []Outbox{f.store}, Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	require.NoError(t, idle.Close())
	idleSrv := httptest.NewServer(idle)
	defer idleSrv.Close()
	resp, err = http.Get(idleSrv.URL + "/")
	require.NoError(t, err)
	resp.Body.Close()
	require.Nil(t, idle.sampler, "no start after Close")
}

func regexpMust(re string) *regexp.Regexp { return regexp.MustCompile(re) }
