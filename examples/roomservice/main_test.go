package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLinksNoDemoMachinery keeps the production command free of what only
// the demo command needs: the Tencent IM fake, the embedded MySQL engine
// (with wazero), testcontainers and the test helpers.
func TestLinksNoDemoMachinery(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	require.NoError(t, err)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/outboxrelay/outboxrelay/sink/tencentim", "the list is this command's")
	for _, pkg := range deps {
		for _, banned := range []string{"/tencentimtest", "github.com/dolthub/", "github.com/tetratelabs/wazero",
			"github.com/testcontainers/", "/internal/testutil", "/roomservice/demo"} {
			require.NotContains(t, pkg, banned, "room-service links demo machinery")
		}
	}
}

// TestDemoFlagPointsAtTheDemoCommand: issue 14's acceptance runs
// "go run ./examples/roomservice -demo", but the demo is a command of its
// own, so that this binary links no fake and no embedded database.
// -demo says so in one line and exits 2.
func TestDemoFlagPointsAtTheDemoCommand(t *testing.T) {
	var out strings.Builder
	require.Equal(t, 2, run([]string{"-demo"}, &out))
	require.Equal(t, demoHint+"\n", out.String())
}
