package roomservice

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
)

// patience bounds how long a test waits for the server to act. The
// server is configured to act after 200ms; waiting this long instead
// tells "cut off" from "left open" without asserting how fast it was.
const patience = 10 * time.Second

// dialRaw opens a TCP connection to addr, closed at the test's end.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// readResponse reads one response from c within patience.
func readResponse(t *testing.T, c net.Conn, r *bufio.Reader) *http.Response {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(patience)))
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp
}

// sendRaw writes request on a new connection to addr and reads the
// response within patience. The server's read timeouts run from the
// moment it starts to read the connection: a client slower than they
// allow to send its request (a loaded machine, between the dial and the
// write) is cut off before the server has read it, without a response.
// That try is sent again on a new connection, so that what the test sees
// does not depend on how fast the client is.
func sendRaw(t *testing.T, addr, request string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		c := dialRaw(t, addr)
		r := bufio.NewReader(c)
		require.NoError(t, c.SetDeadline(deadline))
		_, err := io.WriteString(c, request)
		if err == nil {
			var resp *http.Response
			if resp, err = http.ReadResponse(r, nil); err == nil {
				_, err = io.ReadAll(resp.Body)
				require.NoError(t, err)
				return c, r, resp
			}
		}
		require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "no response within %v", patience)
		t.Logf("the server closed the connection before it read the request (%v); again", err)
		c.Close()
	}
}

// requireClosedByServer waits up to patience for the server to close c.
// A read that times out instead means the server kept it open.
func requireClosedByServer(t *testing.T, c net.Conn, r io.Reader, what string) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(patience)))
	rest, err := io.ReadAll(r)
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "%s: still open after %v", what, patience)
	t.Logf("%s: closed by the server (%d bytes before: %.80q, %v)", what, len(rest), rest, err)
}

// TestSlowAndIdleClientsAreCutOff: with 200ms timeouts, the server closes
// an idle keep-alive connection, a request whose headers stall and one
// whose body stalls.
func TestSlowAndIdleClientsAreCutOff(t *testing.T) {
	const short = 200 * time.Millisecond
	a := startApp(t, nil, func(c *Config) {
		c.HTTP.ReadHeaderTimeout, c.HTTP.ReadTimeout, c.HTTP.IdleTimeout = short, short, short
	})
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})

	t.Run("idle keep-alive", func(t *testing.T) {
		c, r, resp := sendRaw(t, a.Addr(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.False(t, resp.Close, "a keep-alive connection")
		requireClosedByServer(t, c, r, "the idle connection")
	})
	t.Run("slow headers", func(t *testing.T) {
		c := dialRaw(t, a.Addr())
		_, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n")
		require.NoError(t, err)
		requireClosedByServer(t, c, c, "the connection whose headers stalled")
	})
	t.Run("slow body", func(t *testing.T) {
		c, r, resp := sendRaw(t, a.Addr(), "POST /v1/rooms/room-1/join HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Content-Length: 100\r\n\r\n{\"user_id\":")
		require.Equal(t, http.StatusRequestTimeout, resp.StatusCode)
		requireClosedByServer(t, c, r, "the connection whose body stalled")
		require.Zero(t, a.count("SELECT COUNT(*) FROM room_members WHERE user_id = 'bob'"))
	})
}

// TestMaxConnectionsHoldsTheRestInTheBacklog: with max_connections 2, a
// third connection is not served until one of the first two closes.
func TestMaxConnectionsHoldsTheRestInTheBacklog(t *testing.T) {
	a := startApp(t, nil, func(c *Config) { c.HTTP.MaxConnections = 2 })
	get := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	var first net.Conn
	for i := range 2 {
		c := dialRaw(t, a.Addr())
		_, err := io.WriteString(c, get)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, readResponse(t, c, bufio.NewReader(c)).StatusCode, "connection %d", i)
		if i == 0 {
			first = c
		}
	}

	third := dialRaw(t, a.Addr()) // the kernel completes the handshake
	_, err := io.WriteString(third, get)
	require.NoError(t, err)
	// A negative check: a slow machine can only make it pass.
	require.NoError(t, third.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
	n, err := third.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "the third connection was served (%d bytes) while two were open", n)

	require.NoError(t, first.Close())
	require.Equal(t, http.StatusOK, readResponse(t, third, bufio.NewReader(third)).StatusCode, "served once a slot freed")
}

// holdRoomLock locks room's row in a transaction of the test's own, until
// the returned release is called (or the test ends), so that commands on
// the room wait inside their handlers.
func holdRoomLock(t *testing.T, a *testApp, room string) (release func()) {
	t.Helper()
	tx, err := a.db.DB.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() }) // on a failure path too, or shutdown would wait on it
	var id string
	require.NoError(t, tx.QueryRow("SELECT room_id FROM rooms WHERE room_id = ? FOR UPDATE", room).Scan(&id))
	return func() { require.NoError(t, tx.Rollback()) }
}

// waitForLockWaiters waits until n commands wait for a room's row lock.
func waitForLockWaiters(t *testing.T, a *testApp, n int) {
	t.Helper()
	outboxtest.Eventually(t, "commands wait for the room lock", func() bool {
		// Not counting this query itself, whose text matches the pattern too.
		return a.count("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()"+
			" AND INFO LIKE '%FROM rooms WHERE room_id%FOR UPDATE%'", a.db.Name) == n
	})
}

type reply struct {
	status int
	body   []byte
	err    error
}

// postAsync posts a JSON body in the background; the reply arrives on
// the channel. (No require in the goroutine: it reports, the test checks.)
func (a *testApp) postAsync(path, body string) <-chan reply {
	replied := make(chan reply, 1)
	go func() {
		var r reply
		defer func() { replied <- r }()
		resp, err := http.Post("http://"+a.Addr()+path, "application/json", strings.NewReader(body))
		if err != nil {
			r.err = err
			return
		}
		defer resp.Body.Close()
		r.status = resp.StatusCode
		r.body, r.err = io.ReadAll(resp.Body)
	}()
	return replied
}

// TestInFlightCapAnswers503: with max_in_flight 1 and one command held
// inside its handler, the next API request is 503 with Retry-After and a
// JSON error, while the probes still answer.
func TestInFlightCapAnswers503(t *testing.T) {
	a := startApp(t, nil, func(c *Config) { c.HTTP.MaxInFlight = 1 })
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c-create"})
	release := holdRoomLock(t, a, "room-1")
	bob := a.postAsync("/v1/rooms/room-1/join", `{"user_id":"bob","command_id":"c-bob"}`)
	waitForLockWaiters(t, a, 1)

	// Bounded, so that a request that waited for the lock instead fails.
	client := &http.Client{Timeout: patience}
	for _, path := range []string{"/v1/rooms/room-1/join", "/v1/rooms/room-1"} {
		method, body := http.MethodPost, `{"user_id":"carol","command_id":"c-carol"}`
		if path == "/v1/rooms/room-1" {
			method, body = http.MethodGet, ""
		}
		req, err := http.NewRequest(method, "http://"+a.Addr()+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err, "%s %s: answered at once", method, path)
		var e struct{ Error apiError }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
		resp.Body.Close()
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "%s %s", method, path)
		require.Equal(t, "1", resp.Header.Get("Retry-After"))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Equal(t, "overloaded", e.Error.Code)
	}
	for _, probe := range []string{"/healthz", "/readyz"} {
		status, body := a.do(http.MethodGet, probe, "")
		require.Equal(t, http.StatusOK, status, "%s is not counted: %s", probe, body)
	}

	release()
	r := <-bob
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	outboxtest.Eventually(t, "the slot is free again", func() bool {
		status, _ := a.do(http.MethodPost, "/v1/rooms/room-1/join", `{"user_id":"carol","command_id":"c-carol"}`)
		return status == http.StatusOK
	})
	require.Equal(t, []string{"bob", "carol"}, a.snapshot("room-1").Members)
}
