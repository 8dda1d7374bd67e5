package outboxui

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/backendtest"
)

// TestHostileValuesAreText: markup, attribute breakers, control and
// bidirectional characters, invalid UTF-8 and huge values from the
// database reach every page as text.
func TestHostileValuesAreText(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{})
	huge := `{"blob":"` + strings.Repeat("x", 100<<10) + `"}`
	f.enqueue(t,
		outbox.Message{ID: scriptText, Key: attrBreak, Type: attrBreak, Payload: []byte(`{"html":"` + scriptText + `","q":"\"'><img src=x onerror=alert(1)>"}`),
			Headers: map[string]string{attrBreak: scriptText, "bidi": "abc\u202edef"}},
		outbox.Message{ID: "binary", Type: "T", Payload: []byte("\xff\x00" + scriptText + "\x1b[31m")},
		outbox.Message{ID: "huge", Type: "T", Payload: []byte(huge)},
		outbox.Message{ID: "ctl", Type: "T", Payload: []byte("line one\nred \x1b[31m text " + attrBreak)},
	)
	settle(t, f.store, dead(scriptText, attrBreak+" \x1b[2J "+scriptText), dead("binary", "x"), dead("huge", "x"), dead("ctl", "x"))

	rec := func(id string) string {
		return "/record?" + url.Values{"outbox": {"room_outbox"}, "id": {id}}.Encode()
	}
	pages := map[string]string{
		"overview": "/",
		"json":     "/api/overview",
		"dead":     "/records?outbox=room_outbox&view=dead",
		"filtered": "/records?" + url.Values{"outbox": {"room_outbox"}, "type": {attrBreak}, "key": {attrBreak}, "error": {scriptText}}.Encode(),
		"record":   rec(scriptText),
		"binary":   rec("binary"),
		"ctl":      rec("ctl"),
	}
	for name, path := range pages {
		r := c.get(path)
		require.Equal(t, http.StatusOK, r.code, name)
		for _, bad := range []string{"<script>alert", "<img src=x", "\x1b", "\xff", "\u202e"} {
			require.NotContains(t, r.body, bad, "%s shows %q raw", name, bad)
		}
	}
	page := c.get(rec(scriptText)).body
	require.Contains(t, page, "&lt;script&gt;alert(1)&lt;/script&gt;", "the ID, as text")
	require.Contains(t, page, "&#34;&#39;&gt;&lt;img src=x onerror=alert(1)&gt;", "the type and key, as text")
	require.Contains(t, page, `\u001b[2J`, "control characters are shown escaped")
	require.Contains(t, page, `abc\u202edef`, "bidirectional controls too")
	require.Contains(t, page, "JSON, ", "a JSON payload is said to be")
	require.Contains(t, page, "  &#34;html&#34;: &#34;&lt;script&gt;", "and indented")
	require.Contains(t, c.get(rec("binary")).body, "binary, ", "a binary payload is a hex dump")
	require.Contains(t, c.get(rec("ctl")).body, "line one\nred \\u001b[31m text", "text keeps its lines, escapes the rest")
	hugePage := c.get(rec("huge")).body
	require.Contains(t, hugePage, fmt.Sprintf("showing the first %d of %d bytes", DefaultMaxPayloadShown, len(huge)))
	require.Less(t, len(hugePage), DefaultMaxPayloadShown+20<<10, "the page is bounded")
	require.Contains(t, c.get(pages["filtered"]).body, scriptText[:0]+"&lt;script&gt;alert(1)&lt;/script&gt;", "the filter shows as typed, escaped")
}

// TestRecordsFilterAndPaging: dead letters and failing records by type,
// key, error text and age, page by page by Seq.
func TestRecordsFilterAndPaging(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{PageSize: 2})
	var ms []outbox.Message
	var outcomes []backend.Outcome
	for i := range 5 {
		id := fmt.Sprintf("gift-%d", i)
		ms = append(ms, outbox.Message{ID: id, Key: "room-1", Type: "RoomGiftSent"})
		outcomes = append(outcomes, dead(id, "tencent im: 10010 group gone"))
	}
	ms = append(ms, outbox.Message{ID: "left-1", Key: "room-2", Type: "RoomUserLeft"}, outbox.Message{ID: "fail-1", Type: "RoomGiftSent"})
	outcomes = append(outcomes, dead("left-1", "bad request"), backend.Outcome{ID: "fail-1", Kind: backend.OutcomeRetry, RetryIn: time.Hour, Error: "timeout"})
	f.enqueue(t, ms...)
	settle(t, f.store, outcomes...)

	page := c.get("/records?outbox=room_outbox&view=dead&type=RoomGiftSent&error=group+gone")
	require.Contains(t, page.body, "gift-0")
	require.Contains(t, page.body, "gift-1")
	require.NotContains(t, page.body, "gift-2", "a page of two")
	require.NotContains(t, page.body, "left-1")
	next := regexpFind(t, `href="([^"]+)" id="next"`, page.body)
	t.Logf("next: %s", next)
	require.Contains(t, next, "after=")
	require.NotContains(t, next, "offset")
	page2 := c.get(html.UnescapeString(next))
	require.Contains(t, page2.body, "gift-2")
	require.Contains(t, page2.body, "gift-3")
	require.NotContains(t, page2.body, "gift-1")
	require.Contains(t, page2.body, "first page")

	require.Contains(t, c.get("/records?outbox=room_outbox&view=dead&key=room-2").body, "left-1")
	require.NotContains(t, c.get("/records?outbox=room_outbox&view=dead&key=room-2").body, "gift-0")
	failing := c.get("/records?outbox=room_outbox&view=failing").body
	require.Contains(t, failing, "fail-1")
	require.NotContains(t, failing, "gift-0")
	require.Contains(t, c.get("/records?outbox=room_outbox&view=dead&older=1h").body, "No records match.")
	require.Contains(t, c.get("/records?outbox=room_outbox&view=dead&older=1us").body, "gift-0")
	for _, bad := range []string{"older=yesterday", "older=-1h", "view=all", "consumer=..bad", "after=x", "after=-1"} {
		r := c.get("/records?outbox=room_outbox&" + bad)
		require.Equal(t, http.StatusBadRequest, r.code, bad)
	}
	require.Equal(t, http.StatusNotFound, c.get("/record?outbox=room_outbox&id=nope").code)
	require.Equal(t, http.StatusNotFound, c.get("/record?outbox=room_outbox&consumer=gone&id=gift-0").code, "no such consumer")
}

func regexpFind(t *testing.T, re, s string) string {
	t.Helper()
	m := regexpMust(re).FindStringSubmatch(s)
	require.NotNil(t, m, "no match of %s", re)
	return m[1]
}

// TestRequeue: one, the selected and all that match, each after a
// confirmation that shows the count, with the database checked.
func TestRequeue(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{RequeueBatch: 2})
	var ms []outbox.Message
	var outcomes []backend.Outcome
	for i := range 7 {
		id := fmt.Sprintf("d-%d", i)
		ms = append(ms, outbox.Message{ID: id, Type: "RoomGiftSent"})
		outcomes = append(outcomes, dead(id, "group gone"))
	}
	ms = append(ms, outbox.Message{ID: "other", Type: "RoomUserLeft"})
	outcomes = append(outcomes, dead("other", "bad request"))
	f.enqueue(t, ms...)
	settle(t, f.store, outcomes...)
	token := c.csrf("/records?outbox=room_outbox&view=dead")

	// One: the record page's button asks first.
	form := pageForm(url.Values{"csrf": {token}, "outbox": {"room_outbox"}, "scope": {"one"}, "id": {"d-0"}})
	confirm := c.post("/requeue", form)
	require.Equal(t, http.StatusOK, confirm.code)
	require.Contains(t, confirm.body, "Requeue 1 dead letter?")
	require.Equal(t, outbox.StatusDead, statusOf(t, f.store, "d-0"), "asking changes nothing")
	form.Set("confirm", "yes")
	done := c.post("/requeue", form)
	require.Equal(t, http.StatusSeeOther, done.code)
	require.Contains(t, done.header.Get("Location"), "requeued=1")
	require.Equal(t, outbox.StatusPending, statusOf(t, f.store, "d-0"))
	require.Contains(t, c.get(done.header.Get("Location")).body, "Requeued 1 dead letter(s); 0 skipped")

	// Selected, with one that is no longer dead.
	form = pageForm(url.Values{"csrf": {token}, "outbox": {"room_outbox"}, "scope": {"selected"}, "id": {"d-1", "d-2", "d-0"}, "confirm": {"yes"}})
	done = c.post("/requeue", form)
	require.Equal(t, http.StatusSeeOther, done.code)
	require.Contains(t, done.header.Get("Location"), "requeued=2&skipped=1")
	require.Equal(t, outbox.StatusPending, statusOf(t, f.store, "d-2"))

	// All that match: the count is shown, and no more than it is requeued.
	form = pageForm(url.Values{"csrf": {token}, "outbox": {"room_outbox"}, "view": {"dead"}, "scope": {"filter"}, "type": {"RoomGiftSent"}, "error": {"gone"}})
	confirm = c.post("/requeue", form)
	require.Contains(t, confirm.body, "Requeue 4 dead letters?")
	require.Contains(t, confirm.body, `name="count" value="4"`)
	f.enqueue(t, outbox.Message{ID: "late", Type: "RoomGiftSent"})
	settle(t, f.store, dead("late", "group gone"))
	form.Set("confirm", "yes")
	form.Set("count", "4")
	done = c.post("/requeue", form)
	require.Contains(t, done.header.Get("Location"), "requeued=4")
	for i := 3; i < 7; i++ {
		require.Equal(t, outbox.StatusPending, statusOf(t, f.store, fmt.Sprintf("d-%d", i)))
	}
	require.Equal(t, outbox.StatusDead, statusOf(t, f.store, "late"), "only the confirmed count")
	require.Equal(t, outbox.StatusDead, statusOf(t, f.store, "other"), "outside the filter")

	// A named consumer's dead letter, through its own queue.
	settle(t, f.audit, dead("late", "audit down"))
	form = pageForm(url.Values{"csrf": {token}, "outbox": {"room_outbox"}, "consumer": {"audit"}, "scope": {"one"}, "id": {"late"}, "confirm": {"yes"}})
	require.Contains(t, c.post("/requeue", form).header.Get("Location"), "requeued=1")
	require.Equal(t, outbox.StatusPending, statusOf(t, f.audit, "late"))
	require.Equal(t, outbox.StatusDead, statusOf(t, f.store, "late"), "the default consumer's state is its own")
}

// TestPostsAreGuarded: no token, another session's token, another
// origin, read-only: refused, nothing changed.
func TestPostsAreGuarded(t *testing.T) {
	f := newDeadFixture(t)
	c := newClient(t, f, Options{})
	token := c.csrf("/records?outbox=room_outbox")
	form := func(tok string) url.Values {
		return pageForm(url.Values{"csrf": {tok}, "outbox": {"room_outbox"}, "scope": {"one"}, "id": {"d"}, "confirm": {"yes"}})
	}
	require.Equal(t, http.StatusForbidden, c.post("/requeue", form("")).code, "no token")
	other := newClient(t, f, Options{})
	require.Equal(t, http.StatusForbidden, other.post("/requeue", form(token)).code, "a token of another session (and handler)")

	req, err := http.NewRequest(http.MethodPost, c.srv.URL+"/requeue", strings.NewReader(form(token).Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	require.Equal(t, http.StatusForbidden, c.do(req).code, "another origin")
	req, err = http.NewRequest(http.MethodPost, c.srv.URL+"/requeue", strings.NewReader(form(token).Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	require.Equal(t, http.StatusForbidden, c.do(req).code, "a cross-site fetch")
	require.Equal(t, http.StatusMethodNotAllowed, c.get("/requeue").code, "GET changes nothing")
	require.Equal(t, outbox.StatusDead, statusOf(t, f.store, "d"))

	ro := newClient(t, f, Options{ReadOnly: true})
	for _, path := range []string{"/records?outbox=room_outbox&view=dead", "/record?outbox=room_outbox&id=d"} {
		page := ro.get(path).body
		require.Contains(t, page, "read-only")
		require.NotContains(t, page, "Requeue", path)
		require.NotContains(t, page, `type="checkbox"`, path)
	}
	tok := csrfRE.FindStringSubmatch(ro.get("/").body)
	require.Nil(t, tok, "no forms at all on the overview")
	r := ro.post("/requeue", form(ro.ui.token("0000000000000000000000000000000000000000000000000000000000000000")))
	require.Equal(t, http.StatusForbidden, r.code)
	require.Contains(t, r.body, "read-only")
	require.Equal(t, outbox.StatusDead, statusOf(t, f.store, "d"))
}

// TestConcurrentOperators: operators requeue the same dead letter at
// once while others watch the overview; it is requeued once, the others
// are told it was skipped.
func TestConcurrentOperators(t *testing.T) {
	f := newDeadFixture(t)
	c := newClient(t, f, Options{})
	token := c.csrf("/records?outbox=room_outbox")
	const n = 8
	locations := make(chan string, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			locations <- c.post("/requeue", pageForm(url.Values{"csrf": {token}, "outbox": {"room_outbox"}, "scope": {"one"}, "id": {"d"}, "confirm": {"yes"}})).header.Get("Location")
		}()
		go func() {
			defer wg.Done()
			if code := c.get("/api/overview").code; code != http.StatusOK {
				t.Errorf("overview: %d", code)
			}
		}()
	}
	wg.Wait()
	close(locations)
	var done int
	for loc := range locations {
		if strings.Contains(loc, "requeued=1") {
			done++
		} else {
			require.Contains(t, loc, "requeued=0&skipped=1")
		}
	}
	require.Equal(t, 1, done, "requeued once")
	require.Equal(t, outbox.StatusPending, statusOf(t, f.store, "d"))
}

// TestInvalidUTF8Key: a key written by other means than Enqueue (the
// column is binary) shows escaped, and its filter link still works.
func TestInvalidUTF8Key(t *testing.T) {
	f := newFixture(t)
	f.enqueue(t, outbox.Message{ID: "k", Type: "T"})
	settle(t, f.store, dead("k", "x"))
	_, err := f.db.DB.Exec("UPDATE room_outbox SET event_key = X'ff3c7363726970743e' WHERE event_id = 'k'") // \xff<script>
	require.NoError(t, err)
	c := newClient(t, f, Options{})
	for _, path := range []string{"/records?outbox=room_outbox&view=dead", "/record?outbox=room_outbox&id=k"} {
		page := c.get(path).body
		require.Contains(t, page, `\xff&lt;script&gt;`, path)
		require.NotContains(t, page, "<script>", path)
		require.NotContains(t, page, "\xff", path)
	}
	page := c.get("/records?" + url.Values{"outbox": {"room_outbox"}, "view": {"dead"}, "key": {"\xff<script>"}}.Encode()).body
	require.Contains(t, page, `href="/record?id=k&amp;outbox=room_outbox"`, "the filter by that key finds it")
}

// TestTheSuiteHostileValues: every hostile key and error text of the
// backend suite, through the overview, the dead letters and each record
// page: served, with nothing raw that a terminal or a browser would act
// on.
func TestTheSuiteHostileValues(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{PageSize: MaxPageSize})
	keys, texts := backendtest.HostileKeys(), backendtest.HostileTexts()
	var ms []outbox.Message
	var outcomes []backend.Outcome
	for i, k := range keys {
		id := fmt.Sprintf("h-%02d", i)
		ms = append(ms, outbox.Message{ID: id, Key: k, Type: "T", Headers: map[string]string{"h": k}, Payload: []byte(k)})
		outcomes = append(outcomes, dead(id, texts[i%len(texts)]))
	}
	f.enqueue(t, ms...)
	settle(t, f.store, outcomes...)
	pages := []string{"/", "/api/overview", "/records?outbox=room_outbox&view=dead"}
	for _, m := range ms {
		pages = append(pages, "/record?"+url.Values{"outbox": {"room_outbox"}, "id": {m.ID}}.Encode())
	}
	for _, path := range pages {
		r := c.get(path)
		require.Equal(t, http.StatusOK, r.code, path)
		for _, raw := range []string{"\x00", "\x01", "\x1b", "\xff", "\u202e", "\u2028", "\r"} {
			require.NotContains(t, r.body, raw, "%s shows %q raw", path, raw)
		}
	}
	require.Contains(t, c.get("/records?outbox=room_outbox&view=dead").body, "h-00")
}
