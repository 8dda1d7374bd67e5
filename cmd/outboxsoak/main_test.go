package main

import (
	"os"
	"testing"
)

// TestMain lets the test binary stand in for the program: the run
// starts worker processes with os.Executable, which in a test is this
// binary, with the hidden worker subcommand.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == workerCommand {
		os.Exit(workerMain(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}
