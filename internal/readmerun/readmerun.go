// Package readmerun builds a program the README shows, as a user outside
// the repository would: the code block under a marker line, in a module
// of its own that requires the repository's modules (replaced by this
// checkout), built and run with GOWORK=off. Tests of each store run the
// README's quick start for their database with it.
package readmerun

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Snippet returns the Go code block of the repository's README.md that
// follows the line "<!-- quickstart: name -->".
func Snippet(t testing.TB, name string) string {
	t.Helper()
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	marker := "<!-- quickstart: " + name + " -->"
	_, after, ok := strings.Cut(string(b), marker+"\n")
	if !ok {
		t.Fatalf("README.md has no line %s", marker)
	}
	code, ok := strings.CutPrefix(after, "```go\n")
	if !ok {
		t.Fatalf("README.md: no ```go block right after %s", marker)
	}
	code, _, ok = strings.Cut(code, "\n```\n")
	if !ok {
		t.Fatalf("README.md: the block after %s does not end", marker)
	}
	return code + "\n"
}

// Run builds code (package main) in a module of its own outside the
// repository, which requires the repository's modules replaced by this
// checkout, and runs it with env added to the environment. It returns
// what the program printed; a failure to build or a non-zero exit fails
// the test.
func Run(t testing.TB, code string, env ...string) string {
	t.Helper()
	root := repoRoot(t)
	mods, err := modules(root)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", code, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("the README's program: %v", err)
	}
	// Each of the repository's modules the program imports is required;
	// every one is replaced by this checkout, so that their requirements
	// of each other are too.
	required := map[string]bool{}
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		best := ""
		for _, m := range mods {
			if (path == m.path || strings.HasPrefix(path, m.path+"/")) && len(m.path) > len(best) {
				best = m.path
			}
		}
		if best != "" {
			required[best] = true
		}
	}
	dir := t.TempDir()
	var gomod strings.Builder
	gomod.WriteString("module scratch\n\ngo 1.26.0\n\n")
	for _, m := range mods {
		if required[m.path] {
			fmt.Fprintf(&gomod, "require %s v0.0.0\n", m.path)
		}
		fmt.Fprintf(&gomod, "replace %s => %s\n", m.path, m.dir)
	}
	write(t, filepath.Join(dir, "go.mod"), gomod.String())
	write(t, filepath.Join(dir, "main.go"), code)
	base := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := func(extra []string, name string, args ...string) string {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, append(base, extra...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s\nthe program:\n%s", name, strings.Join(args, " "), err, out, code)
		}
		return string(out)
	}
	run(nil, "go", "mod", "tidy")
	run(nil, "go", "build", "-o", "scratch", ".")
	return run(env, filepath.Join(dir, "scratch"))
}

func write(t testing.TB, file, text string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// module is one of the repository's modules: its path and directory.
type module struct{ path, dir string }

// useLine is a line of go.work's use block.
var useLine = regexp.MustCompile(`^\s*(\.[^\s]*)\s*$`)

// modules lists the repository's modules, as go.work uses them.
func modules(root string) ([]module, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	var out []module
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		m := useLine.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		dir := filepath.Join(root, m[1])
		gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		first, _, _ := strings.Cut(string(gomod), "\n")
		path, ok := strings.CutPrefix(first, "module ")
		if !ok {
			return nil, fmt.Errorf("%s/go.mod does not start with its module line", m[1])
		}
		out = append(out, module{path: strings.TrimSpace(path), dir: dir})
	}
	return out, s.Err()
}

// repoRoot is the directory of the repository's go.work, above the
// test's working directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}
