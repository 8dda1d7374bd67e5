package outboxui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// withHost sends a request to c's server as a browser whose address bar
// holds host would (testutil.RequestAs): a rebinding page's script sends
// the page's own origin in Origin and its name in Host.
func (c *client) withHost(method, path, host string, form url.Values, cookies ...*http.Cookie) response {
	c.t.Helper()
	r := testutil.RequestAs(c.t, method, c.srv.URL+path, host, form, cookies...)
	return response{code: r.Code, header: r.Header, body: r.Body}
}

// TestHostCheck: a page on a name that resolves to the dashboard's
// address (DNS rebinding) gets 421 for every page, record and asset,
// and its POST requeues nothing, in read-only and in writable mode;
// loopback names and addresses and the configured hosts are served, on
// any port.
func TestHostCheck(t *testing.T) {
	f := newFixture(t)
	f.enqueue(t, outbox.Message{ID: "d", Type: "T", Payload: []byte(`{"secret":"payload-of-d"}`)})
	settle(t, f.store, dead("d", "x"))
	port := func(c *client) string { return c.srv.URL[strings.LastIndexByte(c.srv.URL, ':'):] }
	pages := []string{"/", "/api/overview", "/records?outbox=room_outbox&view=dead", "/record?outbox=room_outbox&id=d", "/assets/app.js"}

	for _, readOnly := range []bool{false, true} {
		for _, allowed := range [][]string{nil, {"dash.example.com", "10.0.0.5", "2001:db8::1"}} {
			c := newClient(t, f, Options{ReadOnly: readOnly, AllowedHosts: allowed})
			p := port(c)
			// The attacker's page gets a session cookie and its token anyway,
			// to show that its POST is refused for its Host alone.
			token := c.csrf("/records?outbox=room_outbox&view=dead")
			session := c.http.Jar.Cookies(&url.URL{Scheme: "http", Host: c.srv.Listener.Addr().String(), Path: "/"})
			require.Len(t, session, 1)
			for _, host := range []string{
				"rebind.attacker.example" + p, "rebind.attacker.example", "REBIND.attacker.example.:80",
				"localhost.attacker.example" + p, "127.0.0.1.nip.io" + p, "dash.example.com.attacker.example",
				"10.0.0.6" + p, "[2001:db8::2]" + p, "0.0.0.0" + p, "[::]" + p, "169.254.169.254",
			} {
				for _, path := range pages {
					r := c.withHost(http.MethodGet, path, host, nil)
					require.Equal(t, http.StatusMisdirectedRequest, r.code, "read-only %v, allowed %v: GET %s with Host %s", readOnly, allowed, path, host)
					require.NotContains(t, r.body, "payload-of-d", host)
					require.NotContains(t, r.body, host, "the body does not repeat the Host")
				}
				form := pageForm(url.Values{"csrf": {token}, "outbox": {"room_outbox"}, "scope": {"one"}, "id": {"d"}, "confirm": {"yes"}})
				r := c.withHost(http.MethodPost, "/requeue", host, form, session...)
				require.Equal(t, http.StatusMisdirectedRequest, r.code, "read-only %v: POST with Host %s", readOnly, host)
				require.Empty(t, r.header.Get("Location"))
				require.Equal(t, outbox.StatusDead, statusOf(t, f.store, "d"), "nothing requeued")
			}
			served := []string{"127.0.0.1" + p, "localhost" + p, "LocalHost." + p, "localhost", "127.8.9.10:1", "[::1]" + p, "[::ffff:127.0.0.1]" + p}
			if allowed != nil {
				served = append(served, "dash.example.com", "Dash.Example.COM.:8443", "10.0.0.5:9090", "[2001:db8::1]:443", "[2001:db8:0:0::1]")
			} else {
				for _, host := range []string{"dash.example.com", "10.0.0.5:9090", "[2001:db8::1]:443"} {
					require.Equal(t, http.StatusMisdirectedRequest, c.withHost(http.MethodGet, "/", host, nil).code, "not configured: %s", host)
				}
			}
			for _, host := range served {
				r := c.withHost(http.MethodGet, "/record?outbox=room_outbox&id=d", host, nil)
				require.Equal(t, http.StatusOK, r.code, "read-only %v: Host %s", readOnly, host)
				require.Contains(t, r.body, "payload-of-d")
			}
		}
	}

	// A configured host requeues, with its own origin.
	c := newClient(t, f, Options{AllowedHosts: []string{"dash.example.com"}})
	host := "dash.example.com" + port(c)
	page := c.withHost(http.MethodGet, "/records?outbox=room_outbox&view=dead", host, nil)
	require.Equal(t, http.StatusOK, page.code)
	session := (&http.Response{Header: page.header}).Cookies()
	form := pageForm(url.Values{"csrf": {regexpFind(t, csrfRE.String(), page.body)}, "outbox": {"room_outbox"}, "scope": {"one"}, "id": {"d"}, "confirm": {"yes"}})
	r := c.withHost(http.MethodPost, "/requeue", host, form, session...)
	require.Equal(t, http.StatusSeeOther, r.code, r.body)
	require.Contains(t, r.header.Get("Location"), "requeued=1")
	require.Equal(t, outbox.StatusPending, statusOf(t, f.store, "d"))
}

// TestHostileHostHeaders: a Host that is malformed, huge, not UTF-8 or
// holds control characters is refused with 421, never a panic (the
// handler may sit behind a server that checks less than net/http's).
func TestHostileHostHeaders(t *testing.T) {
	f := newFixture(t)
	ui, err := New(Options{Outboxes: []Outbox{f.store}, AllowedHosts: []string{"dash.example.com"}, Logger: outboxtest.Logger(t)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, ui.Close()) })
	for _, host := range []string{
		"", "\xff\xfe", "local\x00host", "localhost\r\nX-Evil: 1", "localhost\t", " localhost", "löcalhost", "dash.example.com\u2028",
		strings.Repeat("a", 1<<20), strings.Repeat("a.", 200) + "com", "[", "[]", "[]:80", "[::1", "]", ":", ":80", "localhost:", "localhost::80",
		"localhost:80:80", "localhost:8o", "localhost:123456", "[::1]x", "[::1]:80:80", "[::1]]", "[fe80::1%25eth0]", "[fe80::1%eth0]:80",
		"::1", "[127.0.0.1]", "127.1", "2130706433", "0x7f.0.0.1", "user@localhost", "localhost/x", "localhost#", "..", ".", "-localhost",
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		require.NotPanics(t, func() { ui.ServeHTTP(rec, req) }, "%q", host)
		require.Equal(t, http.StatusMisdirectedRequest, rec.Code, "%q", host)
		require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"), "%q", host)
	}
}

// TestAllowedHostsAllows is the Host check on its own, case by case.
func TestAllowedHostsAllows(t *testing.T) {
	hs, err := newHostSet([]string{"Dash.Example.com.", "10.0.0.5", "[2001:db8::1]", "::ffff:10.0.0.7", "room_service"})
	require.NoError(t, err)
	for host, want := range map[string]bool{
		"localhost": true, "localhost:9090": true, "LOCALHOST": true, "localhost.": true, "localhost.:1": true,
		"127.0.0.1": true, "127.0.0.1:9090": true, "127.255.255.254:1": true, "[::1]": true, "[::1]:9090": true,
		"[0:0:0:0:0:0:0:1]:80": true, "[::ffff:127.0.0.1]": true,
		"dash.example.com": true, "DASH.EXAMPLE.COM:443": true, "dash.example.com.": true, "dash.example.com.:8080": true,
		"10.0.0.5": true, "10.0.0.5:80": true, "[::ffff:10.0.0.5]": true, "10.0.0.7:1": true, "[2001:db8::1]:8443": true,
		"[2001:DB8:0::1]": true, "room_service:9090": true,

		"sub.dash.example.com": false, "dash.example.com.evil": false, "example.com": false, "localhost.evil": false,
		"sub.localhost": false, "10.0.0.50": false, "[2001:db8::2]": false, "[::]": false, "0.0.0.0": false,
		"128.0.0.1": false, "[::2]": false, "room-service": false, "::1": false, "2001:db8::1": false,
	} {
		require.Equal(t, want, hs.allows(host), "%q", host)
	}
}

// TestAllowedHostsOption: the entries Options.AllowedHosts accepts and
// refuses, the error naming the field, the index and the entry.
func TestAllowedHostsOption(t *testing.T) {
	f := newFixture(t)
	ob := f.store
	for _, good := range []string{"localhost", "dash.example.com", "Dash.Example.COM.", "roomservice-admin.ops.svc.cluster.local",
		"room_service", "10.0.0.5", "::1", "[2001:db8::1]", "xn--bcher-kva.example", "a1", "1a.example"} {
		_, err := New(Options{Outboxes: []Outbox{ob}, AllowedHosts: []string{good}})
		require.NoError(t, err, good)
		require.NoError(t, CheckHost(good), good)
	}
	for bad, why := range map[string]string{
		"":                           "is empty",
		"*":                          "wildcards are not supported",
		"*.example.com":              "wildcards",
		"example.com:9090":           "without a port",
		"[::1]:9090":                 "without a port",
		"http://example.com":         "without a port",
		"127.0.0.1:80":               "without a port",
		"[10.0.0.5]":                 "only an IPv6 address goes in brackets",
		"[::1":                       "without a port",
		"fe80::1%eth0":               "zone",
		"exa mple.com":               "is not a host name",
		"bücher.example":             "xn--",
		"-a.example":                 "is not a host name",
		"a..example":                 "is not a host name",
		"127.1":                      "the last not all digits",
		"1.2.3.4.5":                  "is not a host name",
		"example.com/":               "is not a host name",
		"a\x00b":                     "is not a host name",
		strings.Repeat("a", 64):      "is not a host name",
		strings.Repeat("a.", 200):    "longer than 253",
		strings.Repeat("\xff", 1000): "longer than 253",
	} {
		_, err := New(Options{Outboxes: []Outbox{ob}, AllowedHosts: []string{"ok.example", bad}})
		require.ErrorContains(t, err, "outboxui: AllowedHosts[1] ", "%q", bad)
		require.ErrorContains(t, err, why, "%q", bad)
		require.NotContains(t, err.Error(), "\x00", "the entry is shown escaped")
		require.Less(t, len(err.Error()), 400, "the entry is shown cut")
		require.ErrorContains(t, CheckHost(bad), "outboxui: host ", "%q", bad)
	}
}
