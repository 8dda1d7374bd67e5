package activityservice

import (
	"os"
	"testing"

	"github.com/outboxrelay/outboxrelay/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
