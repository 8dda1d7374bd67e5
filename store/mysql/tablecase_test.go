package mysql_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// TestTableNamesMatchAsTheServerMatchesThem (issue 28, defect 10): with
// orders_outbox present, a store of ORDERS_OUTBOX or Orders_Outbox
// panicked in Migrate, Verify and SchemaStatus (information_schema
// matches names without regard to case, and the store filed the rows
// under a table it did not know). Names are matched as the server
// matches them (lower_case_table_names): where case matters, each name
// is a table of its own, with its own records; where it does not, they
// name the same table.
func TestTableNamesMatchAsTheServerMatchesThem(t *testing.T) {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	lower, err := mysql.New(d.DB, mysql.Options{Table: "orders_outbox"})
	require.NoError(t, err)
	require.NoError(t, lower.Migrate(ctx))
	require.NoError(t, lower.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "lower", Type: "T"}))
	var lctn int
	require.NoError(t, d.DB.QueryRow("SELECT @@lower_case_table_names").Scan(&lctn))

	for _, name := range []string{"ORDERS_OUTBOX", "Orders_Outbox"} {
		s, err := mysql.New(d.DB, mysql.Options{Table: name})
		require.NoError(t, err)
		st, err := s.SchemaStatus(ctx)
		require.NoError(t, err, name)
		if lctn == 0 {
			require.Zero(t, st.Version, "%s: another table, not there yet", name)
			require.ErrorContains(t, s.Verify(ctx), `does, and table names are case-sensitive on this server`)
		} else {
			require.Equal(t, mysql.SchemaVersion, st.Version, "%s: the same table", name)
		}
		require.NoError(t, s.Migrate(ctx), name)
		require.NoError(t, s.Verify(ctx), name)
		require.NoError(t, s.Enqueue(ctx, d.DB, nil, outbox.Message{ID: "id-" + name, Type: "T"}))
		_, err = lower.Get(ctx, "id-"+name)
		if lctn == 0 {
			require.ErrorIs(t, err, outbox.ErrNotFound, "%s is a table of its own", name)
		} else {
			require.NoError(t, err, "%s is orders_outbox", name)
		}
	}
	require.NoError(t, lower.Verify(ctx))
}
