package roomservice

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// scrape GETs /metrics from the admin listener and returns every sample, keyed by name and labels
// as the text format prints them.
func (a *testApp) scrape() map[string]float64 {
	a.t.Helper()
	resp, err := http.Get("http://" + a.AdminAddr() + "/metrics")
	require.NoError(a.t, err)
	defer resp.Body.Close()
	require.Equal(a.t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(a.t, err, line)
		out[line[:i]] = v
	}
	return out
}

// TestMetricsMoveAsEventsFlow scrapes /metrics over HTTP through success,
// failure, a backlog and a dead letter. room-service exports outboxprom's
// conventional names, with outbox="room_outbox" and consumer="default".
func TestMetricsMoveAsEventsFlow(t *testing.T) {
	a := startApp(t, nil, func(c *Config) { c.MetricsStatsInterval = -1 }) // fresh backlog on every scrape
	const (
		labels  = `{consumer="default",outbox="room_outbox"}`
		success = `outbox_publish_success_total{consumer="default",event_type="%s",outbox="room_outbox",path="%s"}`
		failure = `outbox_publish_failure_total{consumer="default",event_type="%s",outbox="room_outbox",path="%s"}`
	)
	metric := func(m map[string]float64, format, typ, path string) float64 {
		return m[strings.Replace(strings.Replace(format, "%s", typ, 1), "%s", path, 1)]
	}
	m := a.scrape()
	require.Contains(t, m, "outbox_pending"+labels)
	require.Zero(t, m["outbox_pending"+labels])
	require.Zero(t, m["outbox_dead_letters"+labels])

	// Success on the fast path.
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c1"})
	a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "bob", "command_id": "c2"})
	m = a.scrape()
	require.Equal(t, 1.0, metric(m, success, "RoomUserJoined", "after_commit"))
	require.Equal(t, 1.0, metric(m, success, "RoomCreated", "after_commit"), "no IM call, still a success")
	require.Positive(t, m[`outbox_publish_latency_seconds_count{consumer="default",outbox="room_outbox",path="after_commit"}`])

	// Failure leaves a backlog.
	a.fakeIM.FailNext(1, 10002, "busy")
	a.command("/v1/rooms/room-1/join", map[string]any{"user_id": "carol", "command_id": "c3"})
	m = a.scrape()
	require.Equal(t, 1.0, metric(m, failure, "RoomUserJoined", "after_commit"))
	require.Equal(t, 1.0, m["outbox_pending"+labels], "the backlog")
	require.Equal(t, 1.0, m[`outbox_backlog{consumer="default",event_type="RoomUserJoined",outbox="room_outbox",status="pending"}`])
	require.Positive(t, m["outbox_oldest_pending_age_seconds"+labels], "ages are measured to the microsecond")

	// The worker delivers it; the backlog drains.
	require.Equal(t, 1, a.processBatch().Published)
	m = a.scrape()
	require.Equal(t, 1.0, metric(m, success, "RoomUserJoined", "worker"))
	require.Zero(t, m["outbox_pending"+labels])
	require.Zero(t, m["outbox_oldest_pending_age_seconds"+labels])

	// A dismissed group: the worker's attempt is permanent, a dead letter.
	a.command("/v1/rooms", map[string]any{"room_id": "room-2", "owner_id": "alice", "command_id": "c4"})
	a.fakeIM.RemoveGroup("room-2")
	a.command("/v1/rooms/room-2/join", map[string]any{"user_id": "dave", "command_id": "c5"})
	require.Equal(t, 1, a.processBatch().Dead)
	m = a.scrape()
	require.Equal(t, 1.0, m[`outbox_dead_total{consumer="default",event_type="RoomUserJoined",outbox="room_outbox"}`])
	require.Equal(t, 1.0, m["outbox_dead_letters"+labels])
	require.Equal(t, 1.0, metric(m, failure, "RoomUserJoined", "worker"))
	require.Zero(t, m["outbox_pending"+labels], "dead is not pending")
	for name := range m {
		require.False(t, strings.HasPrefix(name, "room_outbox_"), "no legacy name: %s", name)
	}
}

// TestTraceParentFromRequestToIM follows a request's trace context into
// the event's headers and onto the Tencent IM call.
func TestTraceParentFromRequestToIM(t *testing.T) {
	a := startApp(t, nil, nil)
	a.command("/v1/rooms", map[string]any{"room_id": "room-1", "owner_id": "alice", "command_id": "c1"})
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req, err := http.NewRequest(http.MethodPost, "http://"+a.Addr()+"/v1/rooms/room-1/join", strings.NewReader(`{"user_id":"bob","command_id":"c2"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", tp)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	reqs := a.fakeIM.Requests()
	require.Equal(t, tp, reqs[len(reqs)-1].TraceParent, "the IM call carries the request's trace")
	var stored string
	require.NoError(t, a.db.DB.QueryRow("SELECT headers FROM room_outbox WHERE event_type = 'RoomUserJoined'").Scan(&stored))
	require.Contains(t, stored, tp)

	// Without one, a new trace starts.
	res := a.command("/v1/rooms/room-1/leave", map[string]any{"user_id": "bob", "command_id": "c3"})
	require.NoError(t, a.db.DB.QueryRow("SELECT headers FROM room_outbox WHERE event_id = ?", res.EventIDs[0]).Scan(&stored))
	require.Regexp(t, `"traceparent":"00-[0-9a-f]{32}-[0-9a-f]{16}-01"`, stored)
}
