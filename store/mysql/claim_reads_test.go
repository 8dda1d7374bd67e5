package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// TestClaimsDoNotReadOtherInstancesLeases keeps issue 30's property: at
// 8 instances, each a store on a pool of its own, claiming at once and
// holding their leases, a claim of due records reads a bounded number of
// rows per row it takes (the session's Handler_read_* counters, around
// the claim's whole transaction: its locking select and its lease), not
// one more for every record the other instances hold. Before the lease
// moved a record out of the due range of idx_due, each claim here read
// about 9 rows per row taken, stepping over the 7 other instances'
// batches; and a store that had not claimed before stepped over all of
// them.
func TestClaimsDoNotReadOtherInstancesLeases(t *testing.T) {
	const (
		instances = 8
		limit     = 50
	)
	d, s := migrated(t, "claim_reads")
	fill(t, d.DB, s.table, 0, instances*limit*5, "pending", "UTC_TIMESTAMP(6) - INTERVAL 1 SECOND")
	_, err := d.DB.Exec("ANALYZE TABLE " + s.table)
	require.NoError(t, err)

	var claimers []*measuredStore
	for range instances + 1 {
		claimers = append(claimers, newMeasuredStore(t, d, s.table))
	}
	late, claimers := claimers[instances], claimers[:instances]
	taken := map[string]bool{}
	keep := func(what string, g claimCount) {
		t.Helper()
		require.Equal(t, limit, len(g.ids), "%s: a full batch", what)
		for _, id := range g.ids {
			require.False(t, taken[id], "%s: %s claimed twice while its lease was held", what, id)
			taken[id] = true
		}
		t.Logf("%s: %d rows read for %d claimed, %d records leased", what, g.reads, len(g.ids), len(taken))
	}
	// One after the other, in the same order twice: the second time, each
	// instance's claim resumes after its own last batch, where the seven
	// others' batches lie.
	for i, c := range claimers {
		keep(fmt.Sprintf("first claim of instance %d", i), c.claim(t, limit))
	}
	for i, c := range claimers {
		what := fmt.Sprintf("second claim of instance %d", i)
		g := c.claim(t, limit)
		keep(what, g)
		require.LessOrEqual(t, g.reads, int64(maxReadsPerClaimed*limit), what)
	}
	// All at once: a claim may also step over (or, a deadlock victim,
	// run again after) the others' claims in flight; on the whole, the
	// bound holds.
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		got   = make([]claimCount, instances)
	)
	for i, c := range claimers {
		wg.Go(func() {
			<-start
			got[i] = c.claim(t, limit)
		})
	}
	close(start)
	wg.Wait()
	var reads int64
	for i, g := range got {
		keep(fmt.Sprintf("concurrent claim of instance %d", i), g)
		reads += g.reads
	}
	require.LessOrEqual(t, reads, int64(maxReadsPerClaimed*limit*instances), "8 concurrent claims")

	// A ninth instance, which has never claimed, starts at the first due
	// record: after every record the eight hold.
	g := late.claim(t, limit)
	keep("a new instance's first claim", g)
	require.LessOrEqual(t, g.reads, int64(maxReadsPerClaimed*len(g.ids)))
}

// maxReadsPerClaimed bounds the rows a claim's transaction reads per row
// it takes: one index entry in idx_due, one primary key lookup to lease
// it, and a little slack.
const maxReadsPerClaimed = 3

// measuredStore is a store on a pool of one connection, so that the
// session counters read on the pool are those of its claims.
type measuredStore struct {
	s    *Store
	conn *sql.DB
}

func newMeasuredStore(t *testing.T, d *testutil.Database, table string) *measuredStore {
	t.Helper()
	db := d.Open(t)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	s, err := New(db, Options{Table: table})
	require.NoError(t, err)
	return &measuredStore{s: s, conn: db}
}

type claimCount struct {
	ids   []string
	reads int64
}

// claim claims up to limit due records for an hour and counts the rows
// its transaction read (less what reading the counters itself reads).
func (m *measuredStore) claim(t *testing.T, limit int) claimCount {
	t.Helper()
	ctx := context.Background()
	conn, err := m.conn.Conn(ctx)
	require.NoError(t, err)
	id := connectionID(t, conn)
	noop := handlerReads(t, conn)
	before := handlerReads(t, conn)
	overhead := before - noop
	require.NoError(t, conn.Close()) // back to the pool, for the claim
	b, err := m.s.Claim(ctx, backend.ClaimParams{Owner: "w", Limit: limit, LeaseFor: time.Hour})
	require.NoError(t, err)
	conn, err = m.conn.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	require.Equal(t, id, connectionID(t, conn), "the pool's one connection ran the claim")
	after := handlerReads(t, conn)
	var c claimCount
	for _, r := range b.Records {
		c.ids = append(c.ids, r.ID)
	}
	c.reads = after - before - overhead
	require.GreaterOrEqual(t, c.reads, int64(len(c.ids)), "at least one read per row claimed")
	return c
}

func connectionID(t *testing.T, conn *sql.Conn) int64 {
	t.Helper()
	var id int64
	require.NoError(t, conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id))
	return id
}
