package backendtest_test

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/store/backendtest"
)

// parallelLeakTest makes TestRunLeakTestRefusesAParallelTest's child run
// RunLeakTest from a parallel test.
const parallelLeakTest = "OUTBOXRELAY_BACKENDTEST_PARALLEL_LEAK_TEST"

// TestRunLeakTestRefusesAParallelTest: called from a parallel test,
// whose goroutine check would count the goroutines of the tests running
// beside it, RunLeakTest fails and says why. The call runs in a child
// process, whose failure is the expected outcome.
func TestRunLeakTestRefusesAParallelTest(t *testing.T) {
	if os.Getenv(parallelLeakTest) == "1" {
		t.Parallel()
		backendtest.RunLeakTest(t, func(*testing.T) backendtest.Harness {
			s := outboxtest.NewStore()
			return backendtest.Harness{
				Store:     s,
				Begin:     func(context.Context) (backendtest.Tx, error) { return s.Begin(), nil },
				OpenStore: func(*testing.T) backend.Store { return s },
			}
		})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunLeakTestRefusesAParallelTest$", "-test.count=1")
	cmd.Env = append(os.Environ(), parallelLeakTest+"=1")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the child passed:\n%s", out)
	require.Contains(t, string(out), "RunLeakTest needs a test that is not parallel")
}
