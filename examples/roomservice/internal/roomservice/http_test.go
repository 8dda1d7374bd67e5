package roomservice

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// send sends a request with the given headers (none added) and returns
// the response, its body read.
func (a *testApp) send(method, url, body string, header http.Header) (*http.Response, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(a.t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return resp, b
}

// errorOf decodes an API error body.
func errorOf(t *testing.T, body []byte) apiError {
	t.Helper()
	var e struct{ Error apiError }
	require.NoError(t, json.Unmarshal(body, &e), "%s", body)
	return e.Error
}

// TestMetricsOnlyOnTheAdminListener: /metrics is served on the admin
// listener and not on the public one; both serve the probes, and the
// admin listener serves no API.
func TestMetricsOnlyOnTheAdminListener(t *testing.T) {
	a := startApp(t, nil, nil)
	public, admin := "http://"+a.Addr(), "http://"+a.AdminAddr()
	require.NotEqual(t, a.Addr(), a.AdminAddr())

	resp, body := a.send(http.MethodGet, public+"/metrics", "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	resp, body = a.send(http.MethodGet, admin+"/metrics", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `outbox_pending{consumer="default",outbox="room_outbox"}`)

	for _, base := range []string{public, admin} {
		for _, probe := range []string{"/healthz", "/readyz"} {
			resp, body := a.send(http.MethodGet, base+probe, "", nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s%s: %s", base, probe, body)
		}
	}
	resp, _ = a.send(http.MethodPost, admin+"/v1/rooms", `{"room_id":"room-1","owner_id":"alice","command_id":"c1"}`,
		http.Header{"Content-Type": {"application/json"}})
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "no API on the admin listener")
	require.Zero(t, a.count("SELECT COUNT(*) FROM rooms"))
}

// TestPostsMustBeJSON: a POST whose Content-Type is not application/json
// (with or without parameters) is 415 with a JSON error, and changes
// nothing. text/plain and forms are what a browser may post cross-site
// without a preflight.
func TestPostsMustBeJSON(t *testing.T) {
	a := startApp(t, nil, nil)
	cases := []struct {
		contentType string
		ok          bool
	}{
		{"", false},
		{"text/plain", false},
		{"text/plain;charset=UTF-8", false},
		{"application/x-www-form-urlencoded", false},
		{"multipart/form-data; boundary=x", false},
		{"application/jsonx", false},
		{"application/json-patch+json", false},
		{"application/json; charset", false}, // a malformed parameter
		{"application/json", true},
		{"application/json; charset=utf-8", true},
		{"Application/JSON", true},
	}
	for i, tc := range cases {
		room := fmt.Sprintf("room-%d", i)
		header := http.Header{}
		if tc.contentType != "" {
			header.Set("Content-Type", tc.contentType)
		}
		resp, body := a.send(http.MethodPost, "http://"+a.Addr()+"/v1/rooms",
			fmt.Sprintf(`{"room_id":%q,"owner_id":"alice","command_id":"c-%d"}`, room, i), header)
		created := a.count("SELECT COUNT(*) FROM rooms WHERE room_id = ?", room)
		if tc.ok {
			require.Equal(t, http.StatusOK, resp.StatusCode, "%q: %s", tc.contentType, body)
			require.Equal(t, 1, created)
			continue
		}
		require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, "%q: %s", tc.contentType, body)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Equal(t, "unsupported_media_type", errorOf(t, body).Code)
		require.Zero(t, created, "%q created the room", tc.contentType)
	}
	require.Zero(t, a.count("SELECT COUNT(*) FROM room_commands WHERE command_id IN ('c-0','c-1','c-2','c-3','c-4','c-5','c-6','c-7')"))
}

// TestUnsafeRequestIDsAreReplaced: an X-Request-Id outside
// [A-Za-z0-9._:-]{1,128} is replaced by a new one, in the response and
// in the event every room member receives; a safe one is kept.
func TestUnsafeRequestIDsAreReplaced(t *testing.T) {
	a := startApp(t, nil, nil)
	cases := []struct {
		name, id string
		kept     bool
	}{
		{"plain", "req-42:a.b_c", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"200 characters", strings.Repeat("a", 200), false},
		{"markup", "<script>alert(1)</script>", false},
		{"quotes", `a"b`, false},
		{"unicode", "réquest-ü", false},
		{"space", "a b", false},
		{"tab", "a\tb", false},
		{"invalid UTF-8", "a\xffb", false},
	}
	for i, tc := range cases {
		room := fmt.Sprintf("room-%d", i)
		resp, body := a.send(http.MethodPost, "http://"+a.Addr()+"/v1/rooms",
			fmt.Sprintf(`{"room_id":%q,"owner_id":"alice","command_id":"c-%d"}`, room, i),
			http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {tc.id}})
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", tc.name, body)
		got := resp.Header.Get("X-Request-Id")
		require.Regexp(t, requestIDRE, got, tc.name)
		if tc.kept {
			require.Equal(t, tc.id, got, tc.name)
		} else {
			require.NotEqual(t, tc.id, got, tc.name)
		}
		var res Result
		require.NoError(t, json.Unmarshal(body, &res))
		var env Envelope
		require.NoError(t, json.Unmarshal(a.record(res.EventIDs[0]).Payload, &env))
		require.Equal(t, got, env.RequestID, "%s: the event carries the ID the response names", tc.name)
	}

	// Error answers carry a safe ID too.
	resp, _ := a.send(http.MethodPost, "http://"+a.Addr()+"/v1/rooms", `{}`,
		http.Header{"Content-Type": {"text/plain"}, "X-Request-Id": {"<b>"}})
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	require.Regexp(t, requestIDRE, resp.Header.Get("X-Request-Id"))

	// CR and LF cannot be sent through net/http's client: on the wire, a
	// bare CR in the value is refused or the ID replaced, never echoed.
	c := dialRaw(t, a.Addr())
	_, err := io.WriteString(c, "GET /v1/rooms/room-0 HTTP/1.1\r\nHost: x\r\nX-Request-Id: a\rSet-Cookie: x=1\r\n\r\n")
	require.NoError(t, err)
	raw := readResponse(t, c, bufio.NewReader(c))
	require.Empty(t, raw.Header.Values("Set-Cookie"))
	if raw.StatusCode == http.StatusOK {
		require.Regexp(t, requestIDRE, raw.Header.Get("X-Request-Id"))
	} else {
		require.Equal(t, http.StatusBadRequest, raw.StatusCode)
	}
}

// TestDecodeErrorsNameJSONFields: a body the API cannot decode gets a 400
// whose message names the JSON field or the position, never a Go type.
func TestDecodeErrorsNameJSONFields(t *testing.T) {
	a := startApp(t, nil, nil)
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})
	a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c-join"})
	gift := "/v1/rooms/room-1/gifts"
	cases := []struct {
		name, path, body, code, message string
	}{
		{"count as a string", gift, `{"user_id":"bob","gift_id":"rose","count":"3","command_id":"x1"}`, "invalid_field", "count: must be an integer"},
		{"count as a fraction", gift, `{"user_id":"bob","gift_id":"rose","count":1.5,"command_id":"x2"}`, "invalid_field", "count: must be an integer"},
		{"count too large", gift, `{"user_id":"bob","gift_id":"rose","count":1e40,"command_id":"x3"}`, "invalid_field", "count: must be an integer"},
		{"user as a number", gift, `{"user_id":7,"gift_id":"rose","count":1,"command_id":"x4"}`, "invalid_field", "user_id: must be a string"},
		{"command id as an object", gift, `{"user_id":"bob","gift_id":"rose","count":1,"command_id":{}}`, "invalid_field", "command_id: must be a string"},
		{"unknown field", gift, `{"user_id":"bob","gift_id":"rose","count":1,"command_id":"x5","x":1}`, "malformed_json", `unknown field "x"`},
		{"long unknown field", gift, `{"` + strings.Repeat("y", 5000) + `":1}`, "malformed_json", `unknown field "yyyy`},
		{"syntax error", gift, `{"user_id": bob}`, "malformed_json", "request body is not valid JSON (at byte 13)"},
		{"empty body", gift, ``, "malformed_json", "request body is empty"},
		{"cut short", gift, `{"user_id":`, "malformed_json", "request body ends inside a JSON value"},
		{"an array", gift, `["bob"]`, "malformed_json", "request body must be a JSON object"},
		{"two objects", gift, `{"user_id":"bob","gift_id":"rose","count":1,"command_id":"x6"}{}`, "malformed_json", "request body must be one JSON object"},
	}
	for _, tc := range cases {
		status, body := a.do(http.MethodPost, tc.path, tc.body)
		require.Equal(t, http.StatusBadRequest, status, "%s: %s", tc.name, body)
		e := errorOf(t, body)
		require.Equal(t, tc.code, e.Code, "%s: %q", tc.name, e.Message)
		require.True(t, strings.HasPrefix(e.Message, tc.message), "%s: %q", tc.name, e.Message)
		require.Less(t, len(e.Message), 200, "%s: the message is bounded", tc.name)
		for _, goWord := range []string{"Go ", "struct", "Request.", "json:", "of type"} {
			require.NotContains(t, e.Message, goWord, tc.name)
		}
	}
	require.Equal(t, 2, a.count("SELECT COUNT(*) FROM room_commands"), "no bad body logged a command")
}

// TestOutboxDashboardOnTheAdminListener: the operators' dashboard is
// served on the admin listener only, under its strict CSP, with the
// outbox's figures; read-only switches its actions off.
func TestOutboxDashboardOnTheAdminListener(t *testing.T) {
	a := startApp(t, nil, nil)
	public, admin := "http://"+a.Addr(), "http://"+a.AdminAddr()
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c1"})

	resp, _ := a.send(http.MethodGet, public+OutboxUIPath, "", nil)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "not on the public listener")
	resp, body := a.send(http.MethodGet, admin+OutboxUIPath, "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	require.Contains(t, string(body), "room_outbox")
	resp, body = a.send(http.MethodGet, admin+OutboxUIPath+"api/overview", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"id":"room_outbox/"`)
	resp, body = a.send(http.MethodGet, admin+OutboxUIPath+"records?outbox=room_outbox&view=dead", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), "Requeue selected")

	ro := startApp(t, nil, func(c *Config) { c.HTTP.OutboxUIReadOnly = true })
	resp, body = ro.send(http.MethodGet, "http://"+ro.AdminAddr()+OutboxUIPath+"records?outbox=room_outbox&view=dead", "", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	require.NotContains(t, string(body), "Requeue selected")
	require.Contains(t, string(body), "read-only")
}
