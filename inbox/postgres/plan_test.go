package postgres_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/inbox/postgres"
	"github.com/outboxrelay/outboxrelay/internal/pgtest"
)

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan tree, with the
// fields the tests look at.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	IndexName string     `json:"Index Name"`
	Relation  string     `json:"Relation Name"`
	Arbiters  []string   `json:"Conflict Arbiter Indexes"`
	Plans     []planNode `json:"Plans"`
}

// explain returns the plan of query with args, flattened, root first.
func explain(t testing.TB, db *sql.DB, query string, args ...any) []planNode {
	t.Helper()
	var text string
	require.NoError(t, db.QueryRowContext(context.Background(), "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&text))
	var out []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal([]byte(text), &out), text)
	require.Len(t, out, 1)
	var flat []planNode
	var walk func(n planNode)
	walk = func(n planNode) {
		flat = append(flat, n)
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(out[0].Plan)
	return flat
}

func nodeTypes(plan []planNode) []string {
	out := make([]string, len(plan))
	for i, n := range plan {
		out[i] = n.NodeType
		if n.IndexName != "" {
			out[i] += " using " + n.IndexName
		} else if n.Relation != "" {
			out[i] += " on " + n.Relation
		}
	}
	return out
}

// TestPurgePlanIsARange: retention reads one consumer's oldest records
// through inbox_processed_idx, in its order (no sort) and stopping at
// the batch, whatever the table holds: other consumers' records, or
// mostly the consumer's own and half of them old; and deletes what it
// read by address (Tid Scan). No plan reads the whole table (a join on
// the key did: a Hash Join over a Seq Scan of the inbox).
func TestPurgePlanIsARange(t *testing.T) {
	for _, tc := range []struct {
		name      string
		consumers []string
		records   int           // each, 10s apart
		window    time.Duration // of the purge, whose plan is checked
		old       int           // the records of "activity" older than the window
	}{
		{"two consumers, few old", []string{"activity", "audit"}, 2000, 14995 * time.Second, 500},
		{"one consumer, half old", []string{"activity"}, 20000, 100000 * time.Second, 10000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := pgtest.NewDatabase(t)
			ctx := context.Background()
			ib := newInbox(t, d.DB, "activity")
			for _, consumer := range tc.consumers {
				insertRecords(t, d.DB, consumer, tc.records, 0, 10*time.Second)
			}
			_, err := d.DB.ExecContext(ctx, "ANALYZE inbox")
			require.NoError(t, err)

			plan := explain(t, d.DB, postgres.Statements(ib).Purge, "activity", tc.window.Seconds(), 100)
			types := nodeTypes(plan)
			require.Contains(t, types, "Index Scan using inbox_processed_idx", "plan: %v", types)
			for _, n := range plan {
				require.NotEqual(t, "Seq Scan", n.NodeType, "plan: %v", types)
				require.NotEqual(t, "Sort", n.NodeType, "plan: %v", types)
			}
			require.Contains(t, types, "Tid Scan on inbox", "plan: %v", types)
			require.Contains(t, types, "Limit", "plan: %v", types)
			require.Contains(t, types, "LockRows", "plan: %v", types)

			// Records written 0 to (records-1)*10s ago: none is older than that.
			n, err := ib.Purge(ctx, time.Duration(tc.records)*10*time.Second, 100)
			require.NoError(t, err)
			require.Zero(t, n)
			// A record turns older than the window every 10s the test runs.
			n, err = ib.Purge(ctx, tc.window, 1000)
			require.NoError(t, err)
			require.InDelta(t, tc.old, n, 10, "the records older than %v, in batches of 1000", tc.window)
		})
	}
}

// TestDedupePlanUsesThePrimaryKey: the duplicate check is the primary
// key's (ON CONFLICT's arbiter), and Contains looks a record up by it.
func TestDedupePlanUsesThePrimaryKey(t *testing.T) {
	d := pgtest.NewDatabase(t)
	ctx := context.Background()
	ib := newInbox(t, d.DB, "activity")
	insertRecords(t, d.DB, "activity", 5000, 0, time.Second)
	insertRecords(t, d.DB, "audit", 5000, 0, time.Second)
	_, err := d.DB.ExecContext(ctx, "ANALYZE inbox")
	require.NoError(t, err)

	plan := explain(t, d.DB, postgres.Statements(ib).Insert, "activity", []byte("evt-00042"))
	require.Equal(t, "ModifyTable", plan[0].NodeType)
	require.Equal(t, []string{"inbox_pkey"}, plan[0].Arbiters)

	plan = explain(t, d.DB, postgres.Statements(ib).Contains, "activity", []byte("evt-00042"))
	types := nodeTypes(plan)
	require.Len(t, plan, 1, "plan: %v", types)
	require.Contains(t, []string{"Index Scan using inbox_pkey", "Index Only Scan using inbox_pkey"}, types[0])
}
