package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/pgtest"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/postgres"
)

// newPGFixture is newFixture on PostgreSQL: the same records in every
// state, in a store/postgres outbox. The DSN carries a password that the
// server (trust auth) ignores, so that the tests can look for it.
func newPGFixture(t *testing.T) (*postgres.Store, []string) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	s, err := postgres.New(d.DB, postgres.Options{Table: "room_outbox"})
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
	_, err = d.DB.Exec("UPDATE room_outbox SET created_at = now() - interval '40 days' WHERE event_id LIKE 'old-%'")
	require.NoError(t, err)
	return s, []string{"OUTBOXCTL_DSN=" + withPassword(t, d.DSN, "pg-Secret-9f2"), "OUTBOXCTL_TABLE=room_outbox"}
}

// withPassword returns the URL dsn with password set.
func withPassword(t *testing.T, dsn, password string) string {
	t.Helper()
	require.True(t, strings.HasPrefix(dsn, "postgres://"), "a URL DSN")
	at := strings.Index(dsn, "@")
	require.Positive(t, at)
	user := strings.SplitN(strings.TrimPrefix(dsn[:at], "postgres://"), ":", 2)[0]
	return "postgres://" + user + ":" + password + dsn[at:]
}

// TestPostgres runs the commands on a PostgreSQL outbox: the driver is
// told by the DSN's form, and every command behaves as on MySQL.
func TestPostgres(t *testing.T) {
	s, env := newPGFixture(t)
	status := func(id string) outbox.Status {
		r, err := s.Get(context.Background(), id)
		if err != nil {
			return "gone"
		}
		return r.Status
	}
	noSecret := func(r result) result {
		t.Helper()
		require.NotContains(t, r.stdout+r.stderr, "pg-Secret-9f2")
		return r
	}

	r := noSecret(ctl(t, env, "stats"))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "2 pending (0 leased), 2 dead")
	require.Regexp(t, `RoomGiftSent\s+1\s+1`, r.stdout)

	r = noSecret(ctl(t, env, "list", "--status", "dead", "--json"))
	require.Equal(t, exitOK, r.code, r.stderr)
	var page struct {
		Records []struct {
			ID        string `json:"id"`
			LastError string `json:"last_error"`
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page), r.stdout)
	require.Len(t, page.Records, 2)

	r = noSecret(ctl(t, env, "show", "p-2"))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NotContains(t, r.stdout, "\x1b", "the payload is shown safely")

	// Repairs ask first, then act.
	r = noSecret(ctl(t, env, "requeue", "d-1"))
	require.Equal(t, exitUnconfirmed, r.code, r.stderr)
	require.Equal(t, outbox.StatusDead, status("d-1"))
	r = noSecret(ctl(t, env, "requeue", "d-1", "--yes"))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, outbox.StatusPending, status("d-1"))
	r = noSecret(ctl(t, env, "requeue", "p-1", "--yes"))
	require.Equal(t, exitConflict, r.code, "a pending record is not dead: %s", r.stderr)
	r = noSecret(ctl(t, env, "requeue", "nope", "--yes"))
	require.Equal(t, exitNotFound, r.code, r.stderr)

	r = noSecret(ctl(t, env, "purge", "--older-than", "30d", "--yes"))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, outbox.Status("gone"), status("old-1"))
	require.Equal(t, outbox.Status("gone"), status("old-2"))
	require.Equal(t, outbox.StatusPublished, status("new-1"), "younger than 30 days")

	r = noSecret(ctl(t, env, "consumers", "add", "activity", "--from", "beginning", "--yes"))
	require.Equal(t, exitOK, r.code, r.stderr)
	r = noSecret(ctl(t, env, "consumers", "add", "activity", "--from", "now", "--yes"))
	require.Equal(t, exitConflict, r.code, r.stderr)
	r = noSecret(ctl(t, env, "stats"))
	require.Equal(t, exitOK, r.code, r.stderr)
	// From the beginning: backfilling until the messages older than it
	// are handed over to it, which its first claim does.
	require.Regexp(t, `activity\s+backfilling`, r.stdout)
	r = noSecret(ctl(t, env, "consumers", "remove", "activity", "--yes"))
	require.Equal(t, exitOK, r.code, r.stderr)

	r = noSecret(ctl(t, env, "migrate"))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("is at schema version %d", postgres.SchemaVersion))

	// A missing table lists the outbox tables that are there.
	r = noSecret(ctl(t, env, "stats", "--table", "room_outbx"))
	require.Equal(t, exitFailed, r.code)
	require.Contains(t, r.stderr, "room_outbox")
	require.Contains(t, r.stderr, "did you mean room_outbox")

	// A DSN the driver cannot reach names the address, not the password.
	r = noSecret(ctl(t, []string{"OUTBOXCTL_DSN=postgres://u:pg-Secret-9f2@127.0.0.1:1/x"}, "stats", "--timeout", "5s"))
	require.Equal(t, exitFailed, r.code, r.stderr)
	require.Contains(t, r.stderr, "u@127.0.0.1:1/x")
	r = noSecret(ctl(t, []string{"OUTBOXCTL_DSN=postgres://u:pg-Secret-9f2@127.0.0.1:5432"}, "stats"))
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "names no database")
	r = noSecret(ctl(t, env, "stats", "--driver", "oracle"))
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `--driver "oracle": must be one of mysql, postgres`)
}

// TestPostgresSchema prints the PostgreSQL DDL, with no database.
func TestPostgresSchema(t *testing.T) {
	r := ctl(t, nil, "schema", "--driver", "postgres", "--table", "orders_outbox")
	require.Equal(t, exitOK, r.code, r.stderr)
	want, err := postgres.SchemaSQL("orders_outbox", 0, postgres.SchemaVersion)
	require.NoError(t, err)
	require.Equal(t, want+"\n", r.stdout)

	r = ctl(t, []string{"OUTBOXCTL_DRIVER=postgres"}, "schema", "--inbox", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v))
	require.Equal(t, "postgres", v["driver"])
	require.Equal(t, "inbox", v["table"])
	require.Contains(t, v["sql"], "CREATE TABLE")

	r = ctl(t, nil, "schema", "--driver", "postgres", "--table", "Bad-Name")
	require.Equal(t, exitUsage, r.code, r.stderr)
}
