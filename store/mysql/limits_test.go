package mysql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

func TestSizeOptions(t *testing.T) {
	d := testutil.NewDatabase(t)
	s, err := mysql.New(d.DB, mysql.Options{MaxPayloadBytes: 10, MaxHeaderBytes: 20})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	err = s.Enqueue(context.Background(), d.DB, nil, outbox.Message{ID: "x", Type: "T", Payload: make([]byte, 11)})
	require.ErrorContains(t, err, "Payload of 11 bytes exceeds MaxPayloadBytes (10)")
	err = s.Enqueue(context.Background(), d.DB, nil, outbox.Message{ID: "x", Type: "T", Headers: map[string]string{"abc": "0123456789abcdef"}})
	require.ErrorContains(t, err, "exceed MaxHeaderBytes (20)")

	for _, tc := range []struct {
		opts mysql.Options
		want string
	}{
		{mysql.Options{MaxPayloadBytes: -1}, "MaxPayloadBytes -1"},
		{mysql.Options{MaxPayloadBytes: 64<<20 + 1}, "MaxPayloadBytes 67108865: must be 1 to 67108864"},
		{mysql.Options{MaxHeaderBytes: -1}, "MaxHeaderBytes -1"},
		{mysql.Options{MaxHeaderBytes: 65536}, "MaxHeaderBytes 65536: must be 1 to 65535"},
		{mysql.Options{MaxClaimBytes: -5}, "MaxClaimBytes -5"},
		{mysql.Options{Table: "bad name", MaxClaimBytes: -5}, `Table "bad name"`},
	} {
		_, err := mysql.New(d.DB, tc.opts)
		require.ErrorContains(t, err, "mysql store: "+tc.want)
	}
}

// TestClaimIsBoundedByBytes: a claim stops taking records once the next
// one would pass MaxClaimBytes, takes one record however large, and the
// records it leaves are claimed next, in order; for every kind of claim
// and consumer.
func TestClaimIsBoundedByBytes(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		for _, named := range []bool{false, true} {
			t.Run(fmt.Sprintf("ordered=%v/named=%v", ordered, named), func(t *testing.T) {
				d := testutil.NewDatabase(t)
				ctx := context.Background()
				s, err := mysql.New(d.DB, mysql.Options{Table: testTable, MaxClaimBytes: 1000})
				require.NoError(t, err)
				require.NoError(t, s.Migrate(ctx))
				var store backend.Store = s
				if named {
					require.NoError(t, s.AddConsumer(ctx, "activity", mysql.StartNow))
					store = consumer(t, s, "activity")
				}
				var ms []outbox.Message
				for i := range 9 {
					ms = append(ms, outbox.Message{ID: fmt.Sprintf("m%d", i), Key: fmt.Sprintf("k%d", i), Type: "T",
						Payload: make([]byte, 390), Headers: map[string]string{"h": "0123456789"}})
				}
				ms = append(ms, outbox.Message{ID: "m9", Key: "k9", Type: "T", Payload: make([]byte, 5000)})
				require.NoError(t, s.Enqueue(ctx, d.DB, nil, ms...))
				var sizes []int
				var got []string
				for len(got) < len(ms) {
					b, err := store.Claim(ctx, backend.ClaimParams{Owner: "t", Limit: 100, LeaseFor: time.Minute, Ordered: ordered})
					require.NoError(t, err)
					require.NotZero(t, b.Len(), "every claim makes progress (so far %v: %v)", sizes, got)
					sizes = append(sizes, b.Len())
					got = append(got, recordIDs(b.Records)...)
				}
				require.Equal(t, []int{2, 2, 2, 2, 1, 1}, sizes, "two records of 401 bytes fit in 1000, three do not; the large one goes alone")
				require.ElementsMatch(t, recordIDs(recordsOf(ms)), got)
			})
		}
	}
}

func recordsOf(ms []outbox.Message) []outbox.Record {
	out := make([]outbox.Record, len(ms))
	for i, m := range ms {
		out[i] = outbox.Record{Message: m}
	}
	return out
}
