package main

import (
	"strings"
	"testing"
)

// TestMergeSums: lines go where the go command puts them, by path and
// semantic version, "/go.mod" after the zip's line; nothing to add
// leaves go.sum as it is.
func TestMergeSums(t *testing.T) {
	sum := "a.com/x v1.3.0/go.mod h1:1=\na.com/x v1.12.1 h1:2=\na.com/x v1.12.1/go.mod h1:3=\nz.com/y v0.1.0/go.mod h1:4=\n"
	if got := string(mergeSums([]byte(sum), nil)); got != sum {
		t.Errorf("nothing to add: %q", got)
	}
	got := string(mergeSums([]byte(sum), []string{repoPath + " v0.9.0/go.mod h1:6=", repoPath + " v0.9.0 h1:5=", "a.com/x v1.12.1 h1:2="}))
	want := "a.com/x v1.3.0/go.mod h1:1=\na.com/x v1.12.1 h1:2=\na.com/x v1.12.1/go.mod h1:3=\n" +
		repoPath + " v0.9.0 h1:5=\n" + repoPath + " v0.9.0/go.mod h1:6=\nz.com/y v0.1.0/go.mod h1:4=\n"
	if got != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, strings.TrimSpace(want))
	}
}
