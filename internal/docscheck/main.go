// Command docscheck checks the repository's documentation: every
// relative link resolves to a file, every #anchor to a heading of its
// target (GitHub's slugs), and every command in a fenced shell block
// that refers to the repository still names what the repository has:
// the package paths of go run, go test, go build and the like, the
// directories of cd, the flags of the example programs, and outboxctl's
// subcommands and flags, and the scripts they run. It also checks what
// the documents say about the modules: docs/layout.md's and
// docs/upgrades.md's lists of modules against go.work, the version of
// every go get and go install of one of them (and of upgrades.md's tags)
// against the one the go.mod files require of each other, and that no
// coverage figure is given (the command that measures it is). It needs
// no database and no network; CI runs it from the repository root:
//
//	go run ./internal/docscheck
//
// It reads README.md, docs/*.md and sink/*/README.md for links and
// commands, and CHANGELOG.md and BENCHMARKS.md for links only. Each
// finding is one line, file:line: what is wrong; any finding fails it
// (exit 1).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

func main() {
	root := flag.String("root", ".", "the repository's root directory")
	flag.Parse()
	n, err := run(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docscheck:", err)
		os.Exit(1)
	}
	if n > 0 {
		fmt.Fprintf(os.Stderr, "docscheck: %d finding(s)\n", n)
		os.Exit(1)
	}
}

// run checks the documentation under root, prints each finding on
// stdout and returns how many there were.
func run(root string) (int, error) {
	docs, linkOnly, err := docFiles(root)
	if err != nil {
		return 0, err
	}
	c := &checker{root: root, outboxctl: buildOutboxctl}
	var findings []finding
	for _, f := range docs {
		fs, err := c.checkFile(f, true)
		if err != nil {
			return 0, err
		}
		findings = append(findings, fs...)
	}
	for _, f := range linkOnly {
		fs, err := c.checkFile(f, false)
		if err != nil {
			return 0, err
		}
		findings = append(findings, fs...)
	}
	fs, err := c.checkModuleLists()
	if err != nil {
		return 0, err
	}
	findings = append(findings, fs...)
	for _, f := range findings {
		fmt.Println(f)
	}
	return len(findings), nil
}

// docFiles lists the files to check, relative to root: those whose
// links and commands are checked, and those whose links only are.
func docFiles(root string) (docs, linkOnly []string, err error) {
	docs = []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "sink/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			return nil, nil, err
		}
		sort.Strings(m)
		for _, p := range m {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return nil, nil, err
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	for _, f := range []string{"CHANGELOG.md", "BENCHMARKS.md"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			linkOnly = append(linkOnly, f)
		}
	}
	return docs, linkOnly, nil
}

// finding is one problem in a document.
type finding struct {
	file string
	line int
	msg  string
}

func (f finding) String() string { return fmt.Sprintf("%s:%d: %s", f.file, f.line, f.msg) }
