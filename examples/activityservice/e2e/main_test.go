//go:build e2e

package e2e

import (
	"os"
	"testing"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
