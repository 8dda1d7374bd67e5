package conformance

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRun: every test runs once, as a subtest of its own name, on a
// harness made for that subtest.
func TestRun(t *testing.T) {
	var mu sync.Mutex
	ran := map[string]string{} // test name: the subtest its harness was made for
	record := func(t *testing.T, h string) {
		mu.Lock()
		defer mu.Unlock()
		ran[t.Name()] = h
	}
	t.Run("Suite", func(t *testing.T) {
		Run(t, func(t *testing.T) string { return t.Name() },
			[]Test[string]{{Name: "A", Fn: record}, {Name: "B", Fn: record}, {Name: "C", Fn: record}})
	})
	require.Equal(t, map[string]string{
		"TestRun/Suite/A": "TestRun/Suite/A",
		"TestRun/Suite/B": "TestRun/Suite/B",
		"TestRun/Suite/C": "TestRun/Suite/C",
	}, ran)
}
