package outboxui

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// A browser, as far as links and forms go. What it hands back is not
// always what the page said: the HTML parser turns every CR and CRLF of
// the page into LF before it reads a tag, a NUL in an attribute into
// U+FFFD, and decodes character references after that (so "&#13;" is a
// CR); submitting a form turns every lone CR and lone LF of a value into
// CRLF. A test that posts the values it meant to post proves nothing
// about what the page makes a browser post.

// htmlForm is a <form> of a page, its fields as a browser reads them.
type htmlForm struct {
	method, action string
	fields         []map[string]string // attributes of each <input> and <button>, in order
}

var (
	formRE  = regexp.MustCompile(`(?s)<form\b([^>]*)>(.*?)</form>`)
	fieldRE = regexp.MustCompile(`<(?:input|button)\b([^>]*)>`)
	attrRE  = regexp.MustCompile(`([a-zA-Z-]+)(?:="([^"]*)")?`)
	hrefRE  = regexp.MustCompile(`href="([^"]*)"`)
)

// parsed is page as a browser's parser sees it: line breaks normalised.
func parsed(page string) string {
	return strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(page)
}

// attrValue is an attribute's value as the browser keeps it.
func attrValue(raw string) string {
	return html.UnescapeString(strings.ReplaceAll(raw, "\x00", "\uFFFD"))
}

func attrsOf(s string) map[string]string {
	m := map[string]string{}
	for _, a := range attrRE.FindAllStringSubmatch(s, -1) {
		m[strings.ToLower(a[1])] = attrValue(a[2])
	}
	return m
}

// postFormOf returns the page's POST form.
func postFormOf(t *testing.T, page string) htmlForm {
	t.Helper()
	for _, m := range formRE.FindAllStringSubmatch(parsed(page), -1) {
		a := attrsOf(m[1])
		if a["method"] != "post" {
			continue
		}
		f := htmlForm{method: a["method"], action: a["action"]}
		for _, fm := range fieldRE.FindAllStringSubmatch(m[2], -1) {
			f.fields = append(f.fields, attrsOf(fm[1]))
		}
		return f
	}
	t.Fatalf("no POST form on the page:\n%s", page)
	return htmlForm{}
}

// submit is what a browser posts from f: its hidden fields, the
// checkboxes tick says to tick, and the submit button whose value is
// button ("" for the form's own submit), each value with its line breaks
// as the form's encoding writes them.
func (f htmlForm) submit(tick func(value string) bool, button string) url.Values {
	crlf := func(s string) string {
		return strings.ReplaceAll(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(s), "\n", "\r\n")
	}
	v := url.Values{}
	for _, a := range f.fields {
		switch {
		case a["type"] == "hidden", a["type"] == "checkbox" && tick != nil && tick(a["value"]),
			a["type"] == "submit" && a["name"] != "" && a["value"] == button:
			v.Add(crlf(a["name"]), crlf(a["value"]))
		}
	}
	return v
}

// recordLinks returns the record pages a page links, by the ID each
// link asks for once a browser has read its href.
func recordLinks(t *testing.T, page string) map[string]string {
	t.Helper()
	links := map[string]string{}
	for _, m := range hrefRE.FindAllStringSubmatch(parsed(page), -1) {
		href := attrValue(m[1])
		if !strings.Contains(href, "/record?") {
			continue
		}
		u, err := url.Parse(href)
		require.NoError(t, err, href)
		links[u.Query().Get("id")] = href
	}
	return links
}

// awkwardIDs are IDs that Enqueue accepts and a browser would not hand
// back unchanged if a page put them raw into a form field, or that a
// careless URL or form encoding would mangle.
func awkwardIDs() []string {
	return []string{
		"nul\x00in the middle", "\x00", "cr\rid", "lf\nid", "crlf\r\nid", "ends with lf\n", "\r\n\r\n", "tab\tid",
		"  leading spaces", "trailing tab\t", "100% %zz %00 %2", "a+b c", "a&b=c;d", "frag#ment?q", `quotes "double" 'single'`,
		"<b>&amp;</b>", "b64:ZA", "ctl \x01\x1b[31m \x7f", "sep\u2028\u2029 bidi\u202e", "\uFFFD",
		strings.Repeat("房", 254) + "\x00", strings.Repeat("😀", outbox.MaxIDLength),
	}
}

// TestRequeueAnyID: dead letters whose IDs hold NUL, CR, LF, spaces at
// the ends, URL and HTML metacharacters or 255 multi-byte characters are
// each opened from the dead letters' links and requeued from their
// record page, then all at once by selection, through the values a
// browser takes from the pages; each goes back to pending.
func TestRequeueAnyID(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{})
	ids := awkwardIDs()
	var ms []outbox.Message
	var outcomes []backend.Outcome
	for i, id := range ids {
		ms = append(ms, outbox.Message{ID: id, Type: "T", Payload: []byte(fmt.Sprintf("payload-%02d", i))})
		outcomes = append(outcomes, dead(id, "x"))
	}
	f.enqueue(t, ms...)
	settle(t, f.store, outcomes...)

	// Each from its record page: the link, the page's button, the
	// confirmation's button.
	links := recordLinks(t, c.get("/records?outbox=room_outbox&view=dead").body)
	for i, id := range ids {
		href, ok := links[id]
		require.True(t, ok, "no link to the record page of %q", id)
		rec := c.get(href)
		require.Equal(t, http.StatusOK, rec.code, "%q", id)
		require.Contains(t, rec.body, `id="status">dead<`, "%q", id)
		require.Contains(t, rec.body, fmt.Sprintf(">payload-%02d<", i), "the page of %q shows its record", id)
		form := postFormOf(t, rec.body)
		confirm := c.post(form.action, form.submit(nil, ""))
		require.Equal(t, http.StatusOK, confirm.code, "%q: %s", id, confirm.body)
		require.Contains(t, confirm.body, "Requeue 1 dead letter?", "%q", id)
		form = postFormOf(t, confirm.body)
		done := c.post(form.action, form.submit(nil, ""))
		require.Equal(t, http.StatusSeeOther, done.code, "%q: %s", id, done.body)
		require.Contains(t, done.header.Get("Location"), "requeued=1&skipped=0", "%q", id)
		require.Equal(t, outbox.StatusPending, statusOf(t, f.store, id), "%q", id)
	}

	// All of them again, ticked on the dead letters' page.
	settle(t, f.store, outcomes...)
	form := postFormOf(t, c.get("/records?outbox=room_outbox&view=dead").body)
	confirm := c.post(form.action, form.submit(func(string) bool { return true }, "selected"))
	require.Equal(t, http.StatusOK, confirm.code, confirm.body)
	require.Contains(t, confirm.body, fmt.Sprintf("Requeue %d dead letters?", len(ids)))
	form = postFormOf(t, confirm.body)
	done := c.post(form.action, form.submit(nil, ""))
	require.Equal(t, http.StatusSeeOther, done.code, done.body)
	require.Contains(t, done.header.Get("Location"), fmt.Sprintf("requeued=%d&skipped=0", len(ids)))
	for _, id := range ids {
		require.Equal(t, outbox.StatusPending, statusOf(t, f.store, id), "%q", id)
	}
}

// TestRequeueByAnyKey: "Requeue all that match" a key filter requeues the
// records of exactly that key, whatever it holds, through the form the
// dead letters' page gives a browser; the page warns when its filter
// form cannot show the key, and the redirect back keeps it.
func TestRequeueByAnyKey(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{})
	keys := []string{"k\x00", "k\n", "k\r\n", "k\r", "k", "k%0A", "k+", "k&key=k", "\x00"}
	var ms []outbox.Message
	var outcomes []backend.Outcome
	for i, k := range keys {
		id := fmt.Sprintf("key-%d", i)
		ms = append(ms, outbox.Message{ID: id, Key: k, Type: "T"})
		outcomes = append(outcomes, dead(id, "x"))
	}
	f.enqueue(t, ms...)
	settle(t, f.store, outcomes...)

	for i, k := range keys {
		page := c.get("/records?" + url.Values{"outbox": {"room_outbox"}, "view": {"dead"}, "key": {k}}.Encode()).body
		require.Equal(t, 1, strings.Count(page, `type="checkbox"`), "the key %q has one dead letter", k)
		require.Equal(t, strings.ContainsAny(k, "\x00\r\n"), strings.Contains(page, `id="filter-note"`), "the page warns when its form cannot show %q", k)
		form := postFormOf(t, page)
		confirm := c.post(form.action, form.submit(nil, "filter"))
		require.Equal(t, http.StatusOK, confirm.code, confirm.body)
		require.Contains(t, confirm.body, "Requeue 1 dead letter?", "key %q", k)
		form = postFormOf(t, confirm.body)
		done := c.post(form.action, form.submit(nil, ""))
		require.Equal(t, http.StatusSeeOther, done.code, done.body)
		loc, err := url.Parse(done.header.Get("Location"))
		require.NoError(t, err)
		require.Equal(t, "1", loc.Query().Get("requeued"), "key %q", k)
		require.Equal(t, k, loc.Query().Get("key"), "the redirect keeps the key")
		for j := range keys {
			want := outbox.StatusDead
			if j <= i {
				want = outbox.StatusPending
			}
			require.Equal(t, want, statusOf(t, f.store, fmt.Sprintf("key-%d", j)), "after requeueing key %q: key %q", k, keys[j])
		}
	}
}

// TestFormValuesNotWrittenByThePage: a form value the page did not write
// (raw, altered by a browser, malformed) is refused with 400 and a
// message that says so; nothing is requeued.
func TestFormValuesNotWrittenByThePage(t *testing.T) {
	f := newDeadFixture(t)
	c := newClient(t, f, Options{})
	token := c.csrf("/records?outbox=room_outbox&view=dead")
	for _, field := range []string{"id", "type", "key", "error"} {
		for _, v := range []string{"d", "b64:!!", "b64:ZA==", "b64:ZB", "b64:ZA\r\n", "\uFFFDb64:ZA", strings.Repeat("x", 10000)} {
			form := url.Values{"csrf": {token}, "outbox": {"room_outbox"}, "scope": {"one"}, "id": {encodeField("d")}, "confirm": {"yes"}}
			form.Set(field, v)
			r := c.post("/requeue", form)
			require.Equal(t, http.StatusBadRequest, r.code, "%s=%q", field, v)
			require.Contains(t, r.body, "form field "+field, "%s=%q", field, v)
			require.Contains(t, r.body, "not as this dashboard wrote it", "%s=%q", field, v)
			require.Less(t, len(r.body), 2000, "the value is shown cut")
		}
	}
	require.Equal(t, outbox.StatusDead, statusOf(t, f.store, "d"))
}

// TestFormOfAFullPage: a page of MaxPageSize selected dead letters with
// the longest IDs of four-byte characters fits in the form the handler
// reads.
func TestFormOfAFullPage(t *testing.T) {
	f := newFixture(t)
	c := newClient(t, f, Options{})
	form := url.Values{"csrf": {c.csrf("/records?outbox=room_outbox&view=dead")}, "outbox": {"room_outbox"}, "view": {"dead"}, "scope": {"selected"}}
	for i := range MaxPageSize {
		form.Add("id", encodeField(fmt.Sprintf("%03d", i)+strings.Repeat("😀", outbox.MaxIDLength-3)))
	}
	require.Less(t, len(form.Encode()), maxFormBytes)
	r := c.post("/requeue", form)
	require.Equal(t, http.StatusOK, r.code, r.body)
	require.Contains(t, r.body, fmt.Sprintf("Requeue %d dead letters?", MaxPageSize))
}
