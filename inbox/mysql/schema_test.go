package mysql_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox/mysql"
	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ib, err := mysql.New(d.Open(t), mysql.Options{Consumer: "c"})
			if err == nil {
				err = ib.Migrate(ctx)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	ib := newInbox(t, d.DB, "c") // and once more
	require.NoError(t, ib.Migrate(ctx))
	var versions, n int
	require.NoError(t, d.DB.QueryRowContext(ctx, "SELECT COUNT(*), MAX(version) FROM inbox_schema_version").Scan(&n, &versions))
	require.Equal(t, 1, n)
	require.Equal(t, mysql.SchemaVersion, versions)
}

func TestMigrateRefusesAForeignTable(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	_, err := d.DB.ExecContext(ctx, "CREATE TABLE inbox (id INT PRIMARY KEY, msg_id VARCHAR(10))")
	require.NoError(t, err)
	ib, err := mysql.New(d.DB, mysql.Options{Consumer: "c"})
	require.NoError(t, err)
	err = ib.Migrate(ctx)
	require.ErrorContains(t, err, `table "inbox" exists but is not an inbox table: it lacks column consumer, column processed_at`)

	_, err = d.DB.ExecContext(ctx, "CREATE TABLE other (consumer VARCHAR(64), msg_id VARCHAR(10), processed_at DATETIME, PRIMARY KEY (msg_id))")
	require.NoError(t, err)
	ib, err = mysql.New(d.DB, mysql.Options{Table: "other", Consumer: "c"})
	require.NoError(t, err)
	require.ErrorContains(t, ib.Migrate(ctx), "it lacks primary key (consumer, msg_id)")
}

func TestMigrateRefusesANewerSchema(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "c")
	_, err := d.DB.ExecContext(ctx, "INSERT INTO inbox_schema_version VALUES (?, UTC_TIMESTAMP(6))", mysql.SchemaVersion+1)
	require.NoError(t, err)
	require.ErrorContains(t, ib.Migrate(ctx), "newer than this build's")
}

// TestSchemaSQLIsWhatMigrateRuns: a database made from SchemaSQL's
// statements is current for Migrate, which then runs no DDL.
func TestSchemaSQLIsWhatMigrateRuns(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	text, err := mysql.SchemaSQL("consumer_inbox")
	require.NoError(t, err)
	require.Contains(t, text, "CREATE TABLE IF NOT EXISTS `consumer_inbox` (")
	require.Contains(t, text, "`consumer_inbox_schema_version`")
	require.NotContains(t, text, "{")
	for _, st := range strings.Split(text, ";\n") {
		if st = strings.TrimSpace(st); st != "" {
			_, err := d.DB.ExecContext(ctx, st)
			require.NoError(t, err, st)
		}
	}
	ib, err := mysql.New(d.DB, mysql.Options{Table: "consumer_inbox", Consumer: "c"})
	require.NoError(t, err)
	require.NoError(t, ib.Migrate(ctx))

	_, err = mysql.SchemaSQL("bad name")
	require.ErrorContains(t, err, `Table "bad name"`)
}
