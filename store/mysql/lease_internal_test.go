package mysql

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

// TestLeaseIDMatchesTheUpgrade: the lease_id a token fences is the one
// the upgrade to schema version 6 gave the same token's lease (computed
// by the server, from the upgrade's own SQL), for workers' tokens with
// and without the top bit, a head start, the extremes and a version 4
// token; tokens the store does not make fence nothing.
func TestLeaseIDMatchesTheUpgrade(t *testing.T) {
	d := testutil.NewDatabase(t)
	var copyStep string
	for _, u := range upgrades {
		if u.version == 6 && u.suffix == "" && u.what == "copy of lease" {
			copyStep = u.ddl
		}
	}
	_, expr, ok := strings.Cut(copyStep, "SET lease_id = ")
	require.True(t, ok, copyStep)
	expr, _, ok = strings.Cut(expr, " WHERE ")
	require.True(t, ok, copyStep)

	for _, token := range []string{
		"0123456789abcdee", "f123456789abcdef", "8000000000000000", "0000000000000000", "ffffffffffffffff", "7fffffffffffffff",
		"h23456789abcdef0", "h000000000000000", "hfffffffffffffff",
	} {
		want, ok := leaseID(token)
		require.True(t, ok, token)
		var got int64
		require.NoError(t, d.DB.QueryRow("SELECT "+expr+" FROM (SELECT ? AS lease) t", token).Scan(&got), token)
		require.Equal(t, got, want, token)
		require.NotZero(t, want, "%s: 0 is no lease", token)
		require.Equal(t, token[0] == 'h', want < 0, "%s: a head start is negative, a worker's lease positive", token)
	}
	v4, ok := leaseID("0123456789abcdef0123456789abcdef")
	require.True(t, ok)
	v5, _ := leaseID("0123456789abcdef")
	require.Equal(t, v5, v4, "a version 4 token fences by its first 16 digits")

	for _, bad := range []string{"", "h", "0123", "0123456789abcdeg", "+123456789abcdef", "h+23456789abcdef", "h12", "0x23456789abcdef", "héllo-wörld-1234"} {
		_, ok := leaseID(bad)
		require.False(t, ok, "%q", bad)
	}
	for range 200 {
		token, made, err := newLeaseToken()
		require.NoError(t, err)
		id, ok := leaseID(token)
		require.True(t, ok, token)
		require.Equal(t, made, id, token)
		require.Positive(t, id, token)
		require.Len(t, token, leaseTokenLength)
	}
	require.Negative(t, headStartID)
	id, ok := leaseID(headStartToken)
	require.True(t, ok)
	require.Equal(t, headStartID, id)
}

// TestTypeChangesRunOnce: a column whose type two versions change gets
// the last version's type in the first one's step, so that Migrate from
// before both copies the table once.
func TestTypeChangesRunOnce(t *testing.T) {
	var first, last step
	for _, u := range upgrades {
		if u.suffix == "" && u.what == "type of status" {
			if first.ddl == "" {
				first = u
			}
			last = u
		}
	}
	require.Equal(t, 5, first.version)
	require.Equal(t, 6, last.version)
	require.Equal(t, "char", first.typ)
	require.Equal(t, "enum", last.typ)
	require.Equal(t, last, lastTypeChange(first))
	require.Equal(t, last, lastTypeChange(last))
	for _, u := range upgrades {
		if u.typ == "" || u.what == "type of status" {
			continue
		}
		require.Equal(t, u, lastTypeChange(u), "%s: one change of its type", u.what)
	}
}
