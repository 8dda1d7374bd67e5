package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// binary is the outboxctl built for these tests: they run it as
// operators do.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outboxctl-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "outboxctl")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build outboxctl: %v\n%s", err, out)
		os.Exit(1)
	}
	code := testutil.Main(m) // terminates the test container, if any
	if err := pgtest.StopContainer(); err != nil {
		fmt.Fprintf(os.Stderr, "terminate the PostgreSQL test container: %v\n", err)
		code = max(code, 1)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func ctl(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run outboxctl: %v", err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// fixture is an outbox table with records in every state.
type fixture struct {
	db    *testutil.Database
	store *mysql.Store
	env   []string // OUTBOXCTL_DSN
}

func newFixture(t *testing.T) fixture {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s, err := mysql.New(d.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(ctx))
	require.NoError(t, s.Enqueue(ctx, d.DB, nil,
		outbox.Message{ID: "p-1", Key: "room-1", Type: "RoomUserJoined", Payload: []byte(`{"user":"bob"}`), Headers: map[string]string{"request_id": "r-1"}},
		outbox.Message{ID: "p-2", Key: "room-1", Type: "RoomGiftSent", Payload: []byte("evil \x1b[31mred\x1b[0m text\x07")},
		outbox.Message{ID: "d-1", Key: "room-2", Type: "RoomGiftSent", Payload: []byte{0xff, 0x00, 0x01}},
		outbox.Message{ID: "d-2", Key: "room-2", Type: "RoomUserLeft"},
		outbox.Message{ID: "old-1", Type: "RoomCreated"}, outbox.Message{ID: "old-2", Type: "RoomCreated"},
		outbox.Message{ID: "new-1", Type: "RoomCreated"}))
	settleAs := func(kind backend.OutcomeKind, errText string, ids ...string) {
		b, err := s.Claim(ctx, backend.ClaimParams{Owner: "fixture", Limit: 10, LeaseFor: time.Minute, IDs: ids})
		require.NoError(t, err)
		var os []backend.Outcome
		for _, id := range ids {
			os = append(os, backend.Outcome{ID: id, Kind: kind, Error: errText})
		}
		_, err = s.Settle(ctx, b.Token, os)
		require.NoError(t, err)
	}
	settleAs(backend.OutcomeDead, "ErrorCode 10010: group not found", "d-1")
	settleAs(backend.OutcomeDead, "ErrorCode 80001: filtered", "d-2")
	settleAs(backend.OutcomePublished, "", "old-1", "old-2", "new-1")
	_, err = d.DB.Exec("UPDATE room_outbox SET created_at = UTC_TIMESTAMP(6) - INTERVAL 40 DAY WHERE event_id LIKE 'old-%'")
	require.NoError(t, err)
	return fixture{db: d, store: s, env: []string{"OUTBOXCTL_DSN=" + d.DSN}}
}

func (f fixture) status(t *testing.T, id string) outbox.Status {
	t.Helper()
	r, err := f.store.Get(context.Background(), id)
	if errors.Is(err, outbox.ErrNotFound) {
		return "gone"
	}
	require.NoError(t, err)
	return r.Status
}

func TestStatsAndList(t *testing.T) {
	f := newFixture(t)
	r := ctl(t, f.env, "stats", "--table", "room_outbox")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 pending (0 leased), 2 dead")
	require.Regexp(t, `RoomGiftSent\s+1\s+1`, r.stdout)

	r = ctl(t, f.env, "stats", "--table", "room_outbox", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st struct {
		Pending, Dead int
		ByType        map[string]backend.TypeStats `json:"by_type"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	require.Equal(t, 2, st.Pending)
	require.Equal(t, 2, st.Dead)
	require.Equal(t, backend.TypeStats{Pending: 1, Dead: 1}, st.ByType["RoomGiftSent"])

	r = ctl(t, f.env, "list", "--table", "room_outbox", "--status", "dead")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "d-1")
	require.Contains(t, r.stdout, "ErrorCode 10010")
	require.NotContains(t, r.stdout, "p-1")

	// Paging: two at a time, following next_after.
	var seen []string
	after := "0"
	for page := 0; page < 10; page++ {
		r = ctl(t, f.env, "list", "--table", "room_outbox", "--limit", "2", "--after", after, "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var p struct {
			Records []struct {
				EventID string `json:"event_id"`
			}
			NextAfter int64 `json:"next_after"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &p))
		for _, rec := range p.Records {
			seen = append(seen, rec.EventID)
		}
		if p.NextAfter == 0 {
			break
		}
		after = fmt.Sprint(p.NextAfter)
	}
	require.Equal(t, []string{"p-1", "p-2", "d-1", "d-2", "old-1", "old-2", "new-1"}, seen)
}

func TestShowIsSafeOnATerminal(t *testing.T) {
	f := newFixture(t)
	r := ctl(t, f.env, "show", "--table", "room_outbox", "p-2")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "\x1b", "no raw escape sequence reaches the terminal")
	require.NotContains(t, r.stdout, "\x07")
	require.Contains(t, r.stdout, `evil \u001b[31mred\u001b[0m text\u0007`)

	r = ctl(t, f.env, "show", "--table", "room_outbox", "d-1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "(binary) ff 00 01")
	require.Contains(t, r.stdout, "ErrorCode 10010")

	r = ctl(t, f.env, "show", "--table", "room_outbox", "p-1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rec))
	require.Equal(t, `{"user":"bob"}`, rec["payload"])
	require.Equal(t, "r-1", rec["headers"].(map[string]any)["request_id"])

	r = ctl(t, f.env, "show", "--table", "room_outbox", "nope")
	require.Equal(t, 4, r.code)
	require.Contains(t, r.stderr, `no record with event ID "nope"`)
}

func TestRequeueAsksFirst(t *testing.T) {
	f := newFixture(t)
	// One ID: shown, not done, without --yes.
	r := ctl(t, f.env, "requeue", "--table", "room_outbox", "d-1")
	require.Equal(t, 3, r.code)
	require.Contains(t, r.stdout, `would requeue dead letter "d-1"`)
	require.Contains(t, r.stderr, "--yes")
	require.Equal(t, outbox.StatusDead, f.status(t, "d-1"))
	r = ctl(t, f.env, "requeue", "--table", "room_outbox", "d-1", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, outbox.StatusPending, f.status(t, "d-1"))

	r = ctl(t, f.env, "requeue", "--table", "room_outbox", "p-1", "--yes")
	require.Equal(t, exitConflict, r.code, "a record that is not dead is refused")
	require.Contains(t, r.stderr, "not dead")
	require.Equal(t, 4, ctl(t, f.env, "requeue", "--table", "room_outbox", "nope", "--yes").code)

	// A filter: a dry run, then for real.
	r = ctl(t, f.env, "requeue", "--table", "room_outbox", "--error-contains", "80001", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "would requeue 1 dead letters")
	require.Equal(t, outbox.StatusDead, f.status(t, "d-2"))
	r = ctl(t, f.env, "requeue", "--table", "room_outbox", "--error-contains", "80001", "--yes", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.JSONEq(t, `{"requeued":1,"done":true}`, r.stdout)
	require.Equal(t, outbox.StatusPending, f.status(t, "d-2"))

	r = ctl(t, f.env, "requeue", "--table", "room_outbox", "--yes")
	require.Equal(t, 2, r.code, "no ID and no filter: --all must be said")
}

func TestPurgeAsksFirstAndKeepsTheBacklog(t *testing.T) {
	f := newFixture(t)
	r := ctl(t, f.env, "purge", "--table", "room_outbox", "--older-than", "720h")
	require.Equal(t, 3, r.code)
	require.Contains(t, r.stdout, "would delete 2 records")
	require.Equal(t, outbox.StatusPublished, f.status(t, "old-1"), "nothing changed")

	r = ctl(t, f.env, "purge", "--table", "room_outbox", "--older-than", "720h", "--dry-run", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"done": false`)

	r = ctl(t, f.env, "purge", "--table", "room_outbox", "--older-than", "720h", "--batch", "1", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "deleted 2")
	for id, want := range map[string]outbox.Status{"old-1": "gone", "old-2": "gone", "new-1": outbox.StatusPublished,
		"p-1": outbox.StatusPending, "d-1": outbox.StatusDead} {
		require.Equal(t, want, f.status(t, id), id)
	}
}

func TestBadUsageAndMissingTable(t *testing.T) {
	f := newFixture(t)
	before, err := f.store.Stats(context.Background())
	require.NoError(t, err)
	cases := []struct {
		args []string
		env  []string
		code int
		want string
	}{
		{nil, f.env, 2, "usage: outboxctl"},
		{[]string{"frobnicate"}, f.env, 2, `unknown command "frobnicate"`},
		{[]string{"stats", "--no-such-flag"}, f.env, 2, "unknown flag --no-such-flag"},
		{[]string{"list", "--table", "room_outbox", "--status", "lost"}, f.env, 2, `--status "lost"`},
		{[]string{"list", "--table", "room_outbox", "--limit", "0"}, f.env, 2, "--limit 0"},
		{[]string{"purge", "--table", "room_outbox"}, f.env, 2, "--older-than is required"},
		{[]string{"purge", "--table", "room_outbox", "--older-than", "soon"}, f.env, 2, `--older-than "soon": not a duration`},
		{[]string{"requeue", "--table", "room_outbox", "a", "b"}, f.env, 2, "at most one event ID"},
		{[]string{"show", "--table", "room_outbox"}, f.env, 2, "show takes an event ID"},
		{[]string{"stats", "--table", "bad-name"}, f.env, 2, `Table "bad-name"`},
		{[]string{"stats"}, []string{"OUTBOXCTL_DSN=", "MYSQL_DSN="}, 2, "no database"},
		{[]string{"stats", "--table", "no_such_table"}, f.env, 1, `table "no_such_table" does not exist`},
		// Issue 28, defect 10: this panicked in the store's schema check.
		{[]string{"stats", "--table", "ROOM_OUTBOX"}, f.env, 1, `table "ROOM_OUTBOX" does not exist in this database; "room_outbox" does`},
		{[]string{"purge", "--table", "no_such_table", "--older-than", "1h", "--yes"}, f.env, 1, `table "no_such_table" does not exist`},
		{[]string{"stats", "--dsn", "root@tcp(127.0.0.1:1)/x"}, nil, 1, "cannot reach"},
	}
	for _, tc := range cases {
		r := ctl(t, tc.env, tc.args...)
		require.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		require.Contains(t, r.stderr, tc.want, "%v", tc.args)
	}
	after, err := f.store.Stats(context.Background())
	require.NoError(t, err)
	before.OldestPending, after.OldestPending = 0, 0 // ages grow by themselves
	require.Equal(t, before, after, "nothing changed")
	require.Equal(t, 0, ctl(t, f.env, "list", "-h").code, "-h is not an error")
	require.True(t, strings.Contains(ctl(t, f.env, "list", "-h").stdout, "-after"), "asked for, help goes to stdout")
}

func TestConsumers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r := ctl(t, f.env, "consumers", "add", "activity", "--from", "beginning", "--table", "room_outbox")
	require.Equal(t, 3, r.code, "asks first")
	require.Contains(t, r.stdout, `would add consumer "activity"`)
	r = ctl(t, f.env, "consumers", "add", "activity", "--from", "beginning", "--table", "room_outbox", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, exitConflict, ctl(t, f.env, "consumers", "add", "activity", "--from", "now", "--table", "room_outbox", "--yes").code, "exists")
	require.Equal(t, 0, ctl(t, f.env, "consumers", "add", "audit", "--from", "now", "--table", "room_outbox", "--yes").code)

	r = ctl(t, f.env, "consumers", "--table", "room_outbox")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `activity\s+1\s+at seq 0`, r.stdout)
	require.Regexp(t, `audit\s+8\s+done`, r.stdout)

	// activity has every retained message pending; audit nothing yet.
	r = ctl(t, f.env, "stats", "--table", "room_outbox")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 pending (0 leased), 2 dead", "the default consumer as before")
	require.Regexp(t, `activity\s+backfilling, at seq 0\s+7\s+0\s+0`, r.stdout)
	require.Regexp(t, `audit\s+seq 8\s+0\s+0\s+0`, r.stdout)

	// activity gives up on p-1; it is activity's dead letter only.
	activity, err := f.store.Consumer("activity")
	require.NoError(t, err)
	b, err := activity.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 10, LeaseFor: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 7, b.Len(), "backfilled")
	outcomes := []backend.Outcome{{ID: "p-1", Kind: backend.OutcomeDead, Error: "activity rejects"}}
	for _, rec := range b.Records[1:] {
		outcomes = append(outcomes, backend.Outcome{ID: rec.ID, Kind: backend.OutcomeRelease})
	}
	_, err = activity.Settle(ctx, b.Token, outcomes)
	require.NoError(t, err)
	r = ctl(t, f.env, "show", "p-1", "--consumer", "activity", "--table", "room_outbox")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `status\s+dead`, r.stdout)
	require.Contains(t, r.stdout, "activity rejects")
	r = ctl(t, f.env, "show", "p-1", "--table", "room_outbox")
	require.Regexp(t, `status\s+pending`, r.stdout, "the default consumer's state is its own")
	r = ctl(t, f.env, "requeue", "--table", "room_outbox", "--consumer", "activity", "--all", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "requeued 1")
	require.Equal(t, outbox.StatusDead, f.status(t, "d-1"), "the default consumer's dead letters untouched")
	require.Equal(t, 4, ctl(t, f.env, "show", "p-1", "--consumer", "nobody", "--table", "room_outbox").code)

	r = ctl(t, f.env, "consumers", "remove", "activity", "--table", "room_outbox", "--yes")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "deleted state rows")
	require.Equal(t, 4, ctl(t, f.env, "consumers", "remove", "activity", "--table", "room_outbox", "--yes").code)
	r = ctl(t, f.env, "consumers", "--table", "room_outbox", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.NotContains(t, r.stdout, "activity")

	for _, bad := range [][]string{
		{"consumers", "add", "x"}, {"consumers", "add", "x", "--from", "later"}, {"consumers", "remove"},
		{"consumers", "frob"}, {"consumers", "add", "bad name", "--from", "now"}, {"consumers", "list", "--from", "now"},
	} {
		r := ctl(t, f.env, append(bad, "--table", "room_outbox")...)
		require.Equal(t, 2, r.code, "%v: %s", bad, r.stderr)
	}
}
