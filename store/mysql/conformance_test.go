package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/store/backendtest"
	"github.com/outboxrelay/outboxrelay/store/mysql"
)

// testTable is not DefaultTable, so that the suites also cover another
// name.
const testTable = "room_outbox"

func newStore(t *testing.T, db *sql.DB) *mysql.Store {
	t.Helper()
	s, err := mysql.New(db, mysql.Options{Table: testTable})
	require.NoError(t, err)
	require.NoError(t, s.Migrate(context.Background()))
	return s
}

func newHarness(t *testing.T) backendtest.Harness {
	d := testutil.NewDatabase(t)
	return backendtest.Harness{
		Store: newStore(t, d.DB),
		Begin: func(ctx context.Context) (backendtest.Tx, error) { return d.DB.BeginTx(ctx, nil) },
		OpenStore: func(t *testing.T) backend.Store {
			return newStore(t, d.Open(t))
		},
	}
}

func TestStoreConformance(t *testing.T) {
	backendtest.RunStoreTests(t, newHarness)
}

func TestWorkerConformance(t *testing.T) {
	backendtest.RunWorkerTests(t, newHarness)
}

// newConsumerHarness runs the suites against a named consumer, next to a
// second one that never claims: every promise of the Store contract holds
// for each consumer of a table.
func newConsumerHarness(t *testing.T) backendtest.Harness {
	d := testutil.NewDatabase(t)
	ctx := context.Background()
	s := newStore(t, d.DB)
	require.NoError(t, s.AddConsumer(ctx, "activity", mysql.StartNow))
	require.NoError(t, s.AddConsumer(ctx, "audit", mysql.StartBeginning))
	consumer := func(s *mysql.Store) backend.Store {
		c, err := s.Consumer("activity")
		require.NoError(t, err)
		return c
	}
	return backendtest.Harness{
		Store: consumer(s),
		Begin: func(ctx context.Context) (backendtest.Tx, error) { return d.DB.BeginTx(ctx, nil) },
		OpenStore: func(t *testing.T) backend.Store {
			return consumer(newStore(t, d.Open(t)))
		},
	}
}

func TestConsumerStoreConformance(t *testing.T) {
	backendtest.RunStoreTests(t, newConsumerHarness)
}

// TestWorkerLeavesNoGoroutine is not parallel: its goroutine check must
// not see another test's.
func TestWorkerLeavesNoGoroutine(t *testing.T) {
	t.Run("Default", func(t *testing.T) { backendtest.RunLeakTest(t, newHarness) })
	t.Run("Consumer", func(t *testing.T) { backendtest.RunLeakTest(t, newConsumerHarness) })
}

func TestConsumerWorkerConformance(t *testing.T) {
	backendtest.RunWorkerTests(t, newConsumerHarness)
}

func TestConsumerContract(t *testing.T) {
	backendtest.RunConsumerTests(t, func(t *testing.T) backendtest.ConsumerHarness {
		h := newHarness(t)
		s := h.Store.(*mysql.Store)
		return backendtest.ConsumerHarness{
			Harness: h,
			Consumer: func(t *testing.T, name string) backend.Store {
				require.NoError(t, s.AddConsumer(context.Background(), name, mysql.StartNow))
				c, err := s.Consumer(name)
				require.NoError(t, err)
				return c
			},
		}
	})
}

func TestAdversarial(t *testing.T) {
	backendtest.RunAdversarialTests(t, newHarness)
}

func TestConsumerAdversarial(t *testing.T) {
	backendtest.RunAdversarialTests(t, newConsumerHarness)
}

func TestOperatorContract(t *testing.T) {
	backendtest.RunOperatorTests(t, newHarness)
}

func TestConsumerOperatorContract(t *testing.T) {
	backendtest.RunOperatorTests(t, newConsumerHarness)
}
