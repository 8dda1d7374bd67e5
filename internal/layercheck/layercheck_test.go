package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestFindCircles(t *testing.T) {
	tests := []struct {
		name    string
		imports map[string][]string
		want    []string // each circle as printed
	}{{
		name: "a child imports its parent: no circle",
		imports: map[string][]string{
			"outbox":            {"outbox/backend"},
			"outbox/backend":    nil,
			"outbox/outboxtest": {"outbox", "outbox/backend"},
			"store/mysql":       {"outbox", "outbox/backend"},
		},
	}, {
		name: "the parent imports a child whose subfolder imports the parent",
		imports: map[string][]string{
			"outbox":                     {"outbox/backend"},
			"outbox/backend":             nil,
			"outbox/backend/backendtest": {"outbox", "outbox/backend"},
		},
		want: []string{"outbox/: outbox, outbox/backend/ import each other:" +
			"\n\toutbox -> outbox/backend\n\toutbox/backend/backendtest -> outbox"},
	}, {
		name: "two siblings through their subfolders",
		imports: map[string][]string{
			"outbox/backend":             nil,
			"outbox/backend/backendtest": {"outbox/outboxtest"},
			"outbox/outboxtest":          {"outbox/backend"},
		},
		want: []string{"outbox/: outbox/backend/, outbox/outboxtest/ import each other:" +
			"\n\toutbox/backend/backendtest -> outbox/outboxtest\n\toutbox/outboxtest -> outbox/backend"},
	}, {
		name: "three top-level folders in a circle, one arrow each",
		imports: map[string][]string{
			"a/x":   {"b/y"},
			"b/y":   {"c"},
			"c":     {"a/z/w"},
			"a/z/w": nil,
		},
		want: []string{"the repository's root: a/, b/, c/ import each other:" +
			"\n\ta/x -> b/y\n\tb/y -> c\n\tc -> a/z/w"},
	}, {
		name: "the root's own package",
		imports: map[string][]string{
			"":    {"sub"},
			"sub": {""},
		},
		want: []string{"the repository's root: " + modulePath + ", sub/ import each other:" +
			"\n\t" + modulePath + " -> sub\n\tsub -> " + modulePath},
	}, {
		name: "an arrow inside a subfolder is not one of the folder's",
		imports: map[string][]string{
			"a":       {"a/x"},
			"a/x":     {"a/x/y"},
			"a/x/y":   nil,
			"a/x/y/z": {"a/x/y"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range findCircles(tt.imports) {
				got = append(got, c.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestRepository runs the check on the repository itself, as CI does,
// when the go command and the workspace are at hand.
func TestRepository(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	if _, err := os.Stat("../../go.work"); err != nil {
		t.Skip("not in the repository's workspace")
	}
	imports, err := goList("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := imports["outbox"]; !ok {
		t.Fatalf("go list did not name package outbox: %d packages", len(imports))
	}
	for _, c := range findCircles(imports) {
		t.Error(c)
	}
}
