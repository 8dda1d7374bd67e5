package postgres_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox/postgres"
	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// TestMigrateIsIdempotentAndConcurrent: eight instances migrating a
// fresh database at once, each on its own pool, all succeed (without
// the advisory lock, two CREATE TABLE IF NOT EXISTS race into a unique
// violation of pg_type), and the version is recorded once.
func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		ib, err := postgres.New(d.Open(t), postgres.Options{Consumer: "c"})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = ib.Migrate(ctx)
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	ib := newInbox(t, d.DB, "c") // and once more
	require.NoError(t, ib.Migrate(ctx))
	var version, n int
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT count(*), max(version) FROM inbox_schema_version").Scan(&n, &version))
	require.Equal(t, 1, n)
	require.Equal(t, postgres.SchemaVersion, version)
	var indexes []string
	rows, err := d.DB.QueryContext(ctx, "SELECT indexname FROM pg_indexes WHERE tablename = 'inbox' ORDER BY indexname")
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		indexes = append(indexes, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"inbox_pkey", "inbox_processed_idx"}, indexes)
}

// TestMigrateWithoutCreateRights: once the table is current, Migrate
// runs no DDL, so a role that may only read and write the table can call
// it at start-up.
func TestMigrateWithoutCreateRights(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	newInbox(t, d.DB, "c")
	role := "app_" + d.Name[len(d.Name)-8:]
	for _, st := range []string{
		"CREATE ROLE " + role + " NOLOGIN",
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON inbox, inbox_schema_version TO " + role,
	} {
		_, err := d.DB.ExecContext(ctx, st)
		require.NoError(t, err, st)
	}
	t.Cleanup(func() {
		_, _ = d.DB.ExecContext(context.Background(), "DROP OWNED BY "+role)
		_, _ = d.DB.ExecContext(context.Background(), "DROP ROLE "+role)
	})
	db := d.Open(t)
	db.SetMaxOpenConns(1) // the session whose role is set
	_, err := db.ExecContext(ctx, "SET ROLE "+role)
	require.NoError(t, err)
	ib, err := postgres.New(db, postgres.Options{Consumer: "c"})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(ctx))

	other, err := postgres.New(db, postgres.Options{Table: "other_inbox", Consumer: "c"})
	require.NoError(t, err)
	require.ErrorContains(t, other.Migrate(ctx), "permission denied", "a new table needs CREATE")
}

func TestMigrateRefusesAForeignTable(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	_, err := d.DB.ExecContext(ctx, "CREATE TABLE inbox (id int PRIMARY KEY, msg_id text)")
	require.NoError(t, err)
	ib, err := postgres.New(d.DB, postgres.Options{Consumer: "c"})
	require.NoError(t, err)
	require.ErrorContains(t, ib.Migrate(ctx),
		`table "inbox" exists but is not an inbox table: it lacks column consumer, column msg_id of type bytea (it is text), column processed_at`)

	_, err = d.DB.ExecContext(ctx, "CREATE TABLE other (consumer text, msg_id bytea, processed_at timestamptz, PRIMARY KEY (msg_id, consumer))")
	require.NoError(t, err)
	ib, err = postgres.New(d.DB, postgres.Options{Table: "other", Consumer: "c"})
	require.NoError(t, err)
	require.ErrorContains(t, ib.Migrate(ctx), "it lacks primary key (consumer, msg_id)")

	// Nothing of the failed migrations stayed: they ran in a transaction.
	var n int
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT count(*) FROM pg_tables WHERE tablename LIKE '%schema_version'").Scan(&n))
	require.Zero(t, n)
}

func TestMigrateRefusesANewerSchema(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "c")
	_, err := d.DB.ExecContext(ctx, "INSERT INTO inbox_schema_version (version) VALUES ($1)", postgres.SchemaVersion+1)
	require.NoError(t, err)
	require.ErrorContains(t, ib.Migrate(ctx), "newer than this build's")
}

// TestSchemaSQLIsWhatMigrateRuns: a database made from SchemaSQL's
// statements is current for Migrate, which then runs no DDL; a table
// name that is a reserved word works, quoted.
func TestSchemaSQLIsWhatMigrateRuns(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	text, err := postgres.SchemaSQL("order")
	require.NoError(t, err)
	require.Contains(t, text, `CREATE TABLE IF NOT EXISTS "order" (`)
	require.Contains(t, text, `"order_schema_version"`)
	require.NotContains(t, text, "{")
	require.NotContains(t, text, "--")
	for _, st := range strings.Split(text, ";\n") {
		if st = strings.TrimSpace(st); st != "" {
			_, err := d.DB.ExecContext(ctx, st)
			require.NoError(t, err, st)
		}
	}
	ib, err := postgres.New(d.DB, postgres.Options{Table: "order", Consumer: "c"})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(ctx))
	var n int
	require.NoError(t, d.DB.QueryRowContext(ctx, `SELECT count(*) FROM "order_schema_version"`).Scan(&n))
	require.Equal(t, 1, n)

	_, err = postgres.SchemaSQL("bad name")
	require.ErrorContains(t, err, `Table "bad name"`)
}
