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
