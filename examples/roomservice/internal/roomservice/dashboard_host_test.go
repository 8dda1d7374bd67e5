package roomservice

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// adminRequest sends a request to the admin listener as a browser at
// host would.
func (a *testApp) adminRequest(method, path, host string, form url.Values, cookies ...*http.Cookie) testutil.Response {
	a.t.Helper()
	return testutil.RequestAs(a.t, method, "http://"+a.AdminAddr()+path, host, form, cookies...)
}

// deadLetter writes a message to room_outbox and makes it a dead letter.
func (a *testApp) deadLetter(id, payload string) {
	a.t.Helper()
	ctx := context.Background()
	require.NoError(a.t, a.store.Enqueue(ctx, a.db.DB, nil, outbox.Message{ID: id, Key: "room-1", Type: "RoomGiftSent", Payload: []byte(payload)}))
	b, err := a.store.Claim(ctx, backend.ClaimParams{Owner: "test", Limit: 1, LeaseFor: time.Minute, IDs: []string{id}})
	require.NoError(a.t, err)
	require.Len(a.t, b.Records, 1)
	_, err = a.store.Settle(ctx, b.Token, []backend.Outcome{{ID: id, Kind: backend.OutcomeDead, Error: "group gone"}})
	require.NoError(a.t, err)
}

// TestOutboxDashboardRefusesRebinding: on the admin listener, a web page
// on a name resolved to the admin address (DNS rebinding) gets 421 from
// the dashboard for its pages, a record and a requeue, with a session
// and its token, writable or read-only; loopback and
// http.outbox_ui_hosts are served; /metrics and the probes answer any
// Host (scrapers use the pod's IP).
func TestOutboxDashboardRefusesRebinding(t *testing.T) {
	for _, readOnly := range []bool{false, true} {
		a := startApp(t, nil, func(c *Config) {
			c.HTTP.OutboxUIReadOnly = readOnly
			c.HTTP.OutboxUIHosts = []string{"roomservice-admin.ops.svc", "10.1.2.3"}
		})
		a.deadLetter("gift-1", `{"secret":"payload-of-gift-1"}`)
		port := a.AdminAddr()[strings.LastIndexByte(a.AdminAddr(), ':'):]

		// The page is given a session and its token anyway, to show that
		// its requests are refused for their Host alone.
		jar, err := cookiejar.New(nil)
		require.NoError(t, err)
		resp, err := (&http.Client{Jar: jar}).Get("http://" + a.AdminAddr() + OutboxUIPath + "records?outbox=room_outbox&view=dead")
		require.NoError(t, err)
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(string(page))
		require.NotNil(t, token)
		session := jar.Cookies(&url.URL{Scheme: "http", Host: a.AdminAddr(), Path: OutboxUIPath})
		require.Len(t, session, 1)
		form := url.Values{"csrf": {token[1]}, "outbox": {"room_outbox"}, "scope": {"one"}, "confirm": {"yes"},
			"id": {"b64:" + base64.RawURLEncoding.EncodeToString([]byte("gift-1"))}}

		for _, host := range []string{"rebind.attacker.example" + port, "rebind.attacker.example", "roomservice-admin.ops.svc.attacker.example" + port, "10.1.2.4" + port} {
			for _, path := range []string{"", "records?outbox=room_outbox&view=dead", "record?outbox=room_outbox&id=gift-1", "api/overview", "assets/app.js"} {
				r := a.adminRequest(http.MethodGet, OutboxUIPath+path, host, nil)
				require.Equal(t, http.StatusMisdirectedRequest, r.Code, "read-only %v: GET %s with Host %s", readOnly, path, host)
				require.NotContains(t, r.Body, "payload-of-gift-1")
			}
			r := a.adminRequest(http.MethodPost, OutboxUIPath+"requeue", host, form, session...)
			require.Equal(t, http.StatusMisdirectedRequest, r.Code, "read-only %v: POST requeue with Host %s", readOnly, host)
			require.Equal(t, outbox.StatusDead, a.record("gift-1").Status, "nothing requeued")
			for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
				require.Equal(t, http.StatusOK, a.adminRequest(http.MethodGet, path, host, nil).Code, "%s answers any Host", path)
			}
		}
		for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "[::1]" + port, "roomservice-admin.ops.svc:9090", "RoomService-Admin.ops.svc.", "10.1.2.3" + port} {
			r := a.adminRequest(http.MethodGet, OutboxUIPath+"record?outbox=room_outbox&id=gift-1", host, nil)
			require.Equal(t, http.StatusOK, r.Code, "Host %s", host)
			require.Contains(t, r.Body, "payload-of-gift-1", host)
		}
		if !readOnly {
			r := a.adminRequest(http.MethodPost, OutboxUIPath+"requeue", a.AdminAddr(), form, session...)
			require.Equal(t, http.StatusSeeOther, r.Code, "the operator's own requeue")
			require.Equal(t, outbox.StatusPending, a.record("gift-1").Status)
		}
	}
}
