package roomservice

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// testApp is a running room-service on a fresh database, with Tencent IM
// served by a fake of the test's own.
type testApp struct {
	*App
	t      *testing.T
	db     *testutil.Database
	fakeIM *tencentimtest.Server
}

// startFakeIM starts a Tencent IM fake for t and returns the tencent_im
// block that points at it.
func startFakeIM(t *testing.T) (*tencentimtest.Server, TencentIMConfig) {
	t.Helper()
	im := TencentIMConfig{SDKAppID: 1400000000, AdminIdentifier: "administrator", SecretKey: "test-secret-key"}
	fake := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: im.SDKAppID, SecretKey: im.SecretKey, AdminIdentifier: im.AdminIdentifier})
	t.Cleanup(fake.Close)
	im.BaseURL = fake.URL()
	return fake, im
}

// startApp starts room-service. By default the worker is switched off, so
// that tests drive it one round at a time with ProcessBatch; mod may
// change any setting.
func startApp(t *testing.T, db *testutil.Database, mod func(*Config)) *testApp {
	t.Helper()
	if db == nil {
		db = testutil.NewDatabase(t)
	}
	fake, im := startFakeIM(t)
	var cfg Config
	off := false
	cfg.NodeID, cfg.HTTP.Addr, cfg.MySQL.DSN, cfg.TencentIM = "test-node", "127.0.0.1:0", db.DSN, im
	cfg.OutboxWorker.Enabled = &off
	cfg.OutboxWorker.PollInterval = 20 * time.Millisecond
	noDrain := time.Duration(0)
	cfg.HTTP.AdminAddr, cfg.HTTP.DrainDelay = "localhost:0", &noDrain
	if mod != nil {
		mod(&cfg)
	}
	cfg = cfg.WithDefaults()
	require.NoError(t, cfg.validate())
	app, err := NewApp(context.Background(), cfg, outboxtest.Logger(t))
	require.NoError(t, err)
	require.NoError(t, app.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = app.Shutdown(ctx)
	})
	return &testApp{App: app, t: t, db: db, fakeIM: fake}
}

// do sends a request and returns the status and the body.
func (a *testApp) do(method, path, body string) (int, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, "http://"+a.Addr()+path, strings.NewReader(body))
	require.NoError(a.t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	return resp.StatusCode, b
}

// command posts a JSON body, requires 200 and decodes the result.
func (a *testApp) command(path string, body map[string]any) Result {
	a.t.Helper()
	res, err := a.tryCommand(path, body)
	require.NoError(a.t, err)
	return res
}

// tryCommand is command that returns what went wrong instead of failing
// the test, for goroutines (which must not call t.FailNow).
func (a *testApp) tryCommand(path string, body map[string]any) (Result, error) {
	b, _ := json.Marshal(body)
	status, resp := a.do(http.MethodPost, path, string(b))
	if status != http.StatusOK {
		return Result{}, fmt.Errorf("POST %s: %d %s", path, status, resp)
	}
	var res Result
	if err := json.Unmarshal(resp, &res); err != nil {
		return Result{}, fmt.Errorf("POST %s: %w", path, err)
	}
	return res, nil
}

func (a *testApp) snapshot(room string) Snapshot {
	a.t.Helper()
	status, body := a.do(http.MethodGet, "/v1/rooms/"+room, "")
	require.Equal(a.t, http.StatusOK, status, string(body))
	var s Snapshot
	require.NoError(a.t, json.Unmarshal(body, &s))
	return s
}

func (a *testApp) record(id string) outbox.Record {
	a.t.Helper()
	r, err := a.store.Get(context.Background(), id)
	require.NoError(a.t, err)
	return r
}

func (a *testApp) processBatch() outbox.BatchResult {
	a.t.Helper()
	res, err := a.worker.ProcessBatch(context.Background())
	require.NoError(a.t, err)
	return res
}

// imDeliveries counts, per event ID, what the fake IM kept.
func (a *testApp) imDeliveries() map[string]int {
	n := map[string]int{}
	for _, m := range a.fakeIM.AllMessages() {
		for _, e := range m.Elems {
			var ext struct {
				EventID string `json:"event_id"`
			}
			require.NoError(a.t, json.Unmarshal([]byte(e.Ext), &ext))
			n[ext.EventID]++
		}
	}
	return n
}

// unpublished counts the default consumer's records not published yet
// (pending or dead), through the operator contract on the test's own
// pool: the store's tables are its business.
func (a *testApp) unpublished() int {
	a.t.Helper()
	s, err := mysql.New(a.db.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(a.t, err)
	st, err := s.Stats(context.Background())
	require.NoError(a.t, err)
	return st.Pending + st.Dead
}

// count runs a COUNT(*) query on the test's own pool.
func (a *testApp) count(query string, args ...any) int {
	a.t.Helper()
	var n int
	require.NoError(a.t, a.db.DB.QueryRow(query, args...).Scan(&n))
	return n
}

func jsonBody(v any) string {
	var b bytes.Buffer
	_ = json.NewEncoder(&b).Encode(v)
	return b.String()
}
