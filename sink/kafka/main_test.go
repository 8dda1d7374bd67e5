package kafka_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind: of a
// client the sink made, of its second client, or of a kfake cluster.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
