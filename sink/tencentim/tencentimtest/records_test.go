package tencentimtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStoreKeepsCountersBounded: the Randoms remembered for the dedupe
// and the per-group counters stay within the records' bound however
// many groups and Randoms go by.
func TestStoreKeepsCountersBounded(t *testing.T) {
	s := NewServer(Config{SDKAppID: 1, SecretKey: "k", AdminIdentifier: "a", MaxRecords: 100})
	t.Cleanup(s.Close)
	now := time.Unix(1_700_000_000, 0)
	s.SetNow(func() time.Time { return now })
	for i := range 10000 {
		group, random := fmt.Sprintf("room-%d", i), uint32(i)
		a := s.store(&group, Message{API: APISendGroupMsg, Random: random}, &random)
		require.Equal(t, "OK", a.ActionStatus)
	}
	require.Equal(t, 100, s.messages.len())
	require.Equal(t, 100, s.randoms.len())
	require.LessOrEqual(t, len(s.randoms.order), 200)
	require.LessOrEqual(t, len(s.seq), 200)

	// A Random leaves the window after five minutes.
	group, random := "room-9999", uint32(9999)
	now = now.Add(dedupeWindow)
	a := s.store(&group, Message{API: APISendGroupMsg, Random: random}, &random)
	require.Equal(t, uint64(2), a.MsgSeq, "stored again, as the next message of its group")
	require.Equal(t, 1, s.randoms.len(), "everything older left the window")
}

func TestRing(t *testing.T) {
	r := newRing[int](3)
	require.Empty(t, r.all())
	for i := range 7 {
		r.push(i)
		require.Equal(t, min(i+1, 3), r.len())
	}
	require.Equal(t, []int{4, 5, 6}, r.all())
}
