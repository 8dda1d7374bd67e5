// Command layercheck fails when two parts of the repository import each
// other at the folder level: when, inside one folder, the folder's own
// package and its subfolders (each subfolder taken together with
// everything below it) import one another in a circle. The core imports
// none of the packages built on it, so a folder's picture reads from the
// top down: outbox imports outbox/backend, so nothing under
// outbox/backend may import outbox; and nothing under outbox/outboxui
// may import a package that imports outbox/outboxui, whatever folder
// either sits in below outbox.
//
// Go itself forbids a cycle of packages; this forbids one of folders,
// which the compiler allows and a reader of the tree cannot follow. It
// reads the imports of every package of every module of the workspace
// (go list from the repository root, where go.work is) and checks every
// folder, the root included. Test files are left out: a package's tests
// build into a test binary that sits above everything they use (the
// tests of outbox run a real store of store/mysql), which is no arrow of
// the package's own. CI runs it from the repository root:
//
//	go run ./internal/layercheck
//
// Each circle is printed with the imports that close it; any circle
// fails it (exit 1).
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// modulePath is the root module's path; every package of the repository
// is under it.
const modulePath = "github.com/outboxrelay/outboxrelay"

func main() {
	root := flag.String("root", ".", "the repository's root directory (where go.work is)")
	flag.Parse()
	imports, err := goList(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "layercheck:", err)
		os.Exit(1)
	}
	circles := findCircles(imports)
	for _, c := range circles {
		fmt.Println(c)
	}
	if len(circles) > 0 {
		fmt.Fprintf(os.Stderr, "layercheck: %d folder(s) whose parts import each other (of %d packages)\n", len(circles), len(imports))
		os.Exit(1)
	}
	fmt.Printf("layercheck: %d packages, no folder whose parts import each other\n", len(imports))
}

// goList returns the repository's own imports of every package of every
// module of the workspace at root, by path relative to the repository
// ("" for a package at the root itself).
func goList(root string) (map[string][]string, error) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", modulePath+"/...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	imports := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		pkg, ok := rel(fields[0])
		if !ok {
			continue
		}
		imports[pkg] = imports[pkg][:0:0]
		for _, imp := range fields[1:] {
			if r, ok := rel(imp); ok {
				imports[pkg] = append(imports[pkg], r)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(imports) == 0 {
		return nil, fmt.Errorf("go list named no package of %s", modulePath)
	}
	return imports, nil
}

// rel returns importPath relative to the repository, and whether it is
// one of the repository's.
func rel(importPath string) (string, bool) {
	if importPath == modulePath {
		return "", true
	}
	r, ok := strings.CutPrefix(importPath, modulePath+"/")
	return r, ok
}
