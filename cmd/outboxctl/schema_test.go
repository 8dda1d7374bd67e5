package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	inboxmysql "github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// TestSchemaPrintsTheSQL: outboxctl schema prints SchemaSQL for the
// table, with no database, and refuses versions it does not know.
func TestSchemaPrintsTheSQL(t *testing.T) {
	r := ctl(t, []string{"OUTBOXCTL_DSN="}, "schema", "--table", "orders_outbox")
	require.Equal(t, exitOK, r.code, r.stderr)
	want, err := mysql.SchemaSQL("orders_outbox", 0, mysql.SchemaVersion)
	require.NoError(t, err)
	require.Equal(t, want+"\n", r.stdout)
	require.Contains(t, r.stdout, "CREATE TABLE IF NOT EXISTS `orders_outbox_state`")

	r = ctl(t, nil, "schema", "--table", "orders_outbox", "--from", "2", "--to", "3")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "ALTER TABLE `orders_outbox` ADD INDEX idx_fanout (fanout, id)")
	require.NotContains(t, r.stdout, "occurred_at", "version 4's steps are not asked for")

	r = ctl(t, nil, "schema", "--from", "10")
	require.Equal(t, exitUsage, r.code)
	r = ctl(t, nil, "schema", "--table", "bad`name")
	require.Equal(t, exitUsage, r.code)
}

// TestSchemaPrintsTheInboxSQL: with --inbox, schema prints inbox/mysql's
// SchemaSQL (table "inbox" by default).
func TestSchemaPrintsTheInboxSQL(t *testing.T) {
	r := ctl(t, []string{"OUTBOXCTL_DSN="}, "schema", "--inbox")
	require.Equal(t, exitOK, r.code, r.stderr)
	want, err := inboxmysql.SchemaSQL(inboxmysql.DefaultTable)
	require.NoError(t, err)
	require.Equal(t, want+"\n", r.stdout)

	r = ctl(t, nil, "schema", "--inbox", "--table", "activity_inbox", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "CREATE TABLE IF NOT EXISTS `activity_inbox`")
	require.Contains(t, r.stdout, `"inbox": true`)

	r = ctl(t, nil, "schema", "--inbox", "--from", "1")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "--inbox takes no --from or --to")
	r = ctl(t, nil, "schema", "--inbox", "--table", "bad`name")
	require.Equal(t, exitUsage, r.code)
}

// TestMigrateCommand: without --yes, migrate shows the statements and
// changes nothing (exit 3); with --yes it makes the tables, and again
// has nothing to do.
func TestMigrateCommand(t *testing.T) {
	d := testutil.NewDatabase(t)
	env := []string{"OUTBOXCTL_DSN=" + d.DSN}
	r := ctl(t, env, "migrate", "--table", "room_outbox")
	require.Equal(t, exitUnconfirmed, r.code, r.stderr)
	require.Contains(t, r.stdout, fmt.Sprintf("would bring table room_outbox from schema version 0 to %d", mysql.SchemaVersion))
	require.Contains(t, r.stdout, "CREATE TABLE IF NOT EXISTS `room_outbox`")
	s, err := mysql.New(d.DB, mysql.Options{Table: "room_outbox"})
	require.NoError(t, err)
	require.ErrorContains(t, s.Verify(context.Background()), "does not exist", "nothing made")

	r = ctl(t, env, "migrate", "--table", "room_outbox", "--yes")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, s.Verify(context.Background()))
	r = ctl(t, env, "migrate", "--table", "room_outbox", "--json")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.JSONEq(t, fmt.Sprintf(`{"version": %d, "statements": [], "done": true}`, mysql.SchemaVersion), r.stdout)
}
