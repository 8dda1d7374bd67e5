package backend_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

func TestCheckOutcomes(t *testing.T) {
	pub := func(id string) backend.Outcome { return backend.Outcome{ID: id, Kind: backend.OutcomePublished} }
	retry := backend.Outcome{ID: "a", Kind: backend.OutcomeRetry, RetryIn: time.Second}

	out, err := backend.CheckOutcomes("s", []backend.Outcome{pub("a"), pub("b")})
	require.NoError(t, err)
	require.Equal(t, []backend.Outcome{pub("a"), pub("b")}, out)

	out, err = backend.CheckOutcomes("s", []backend.Outcome{pub("a"), pub("b"), retry})
	require.NoError(t, err)
	require.Equal(t, []backend.Outcome{pub("b"), retry}, out, "the last outcome of a repeated ID, in order")

	_, err = backend.CheckOutcomes("mysql store", []backend.Outcome{pub("a"), {ID: "x", Kind: backend.OutcomeKind(99)}})
	require.EqualError(t, err, `mysql store: settle "x": unknown kind 99`)
	_, err = backend.CheckOutcomes("s", []backend.Outcome{{ID: "y", Kind: backend.OutcomeRetry, RetryIn: -time.Second}})
	require.EqualError(t, err, `s: settle "y": RetryIn -1s: must not be negative`)
}

func TestAllPublished(t *testing.T) {
	require.False(t, backend.AllPublished(nil))
	require.True(t, backend.AllPublished([]backend.Outcome{{ID: "a", Kind: backend.OutcomePublished}}))
	require.False(t, backend.AllPublished([]backend.Outcome{{ID: "a", Kind: backend.OutcomePublished}, {ID: "b", Kind: backend.OutcomeRelease}}))
}
