package main

import (
	"fmt"
	"go/build"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// packages lists the packages of module m that a user can import (or,
// with mains, the main packages a user can install): none under an
// internal or testdata directory, none in a nested module, none with
// only test files. It reads the files (go/build), not the module graph,
// so that a module whose requirements are broken still lists them.
func (s *sim) packages(m *repoModule, mains bool) ([]string, error) {
	root := s.t.abs(m)
	var pkgs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if p != root && (name == "testdata" || name == "internal" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != root {
			return filepath.SkipDir
		}
		bp, err := build.Default.ImportDir(p, 0)
		if err != nil || len(bp.GoFiles) == 0 || (bp.Name == "main") != mains {
			return nil // no buildable package here
		}
		pkgs = append(pkgs, path.Join(m.Path, rel))
		return nil
	})
	return pkgs, err
}

// consume builds, from a directory outside the repository, a program
// importing every package of library module m, as a user would: go get
// m at the release's version, go mod tidy, go build, go vet. Then every
// module of the repository in its graph must be at the release's
// version, with the hash of the zip the proxy holds.
func (s *sim) consume(m *repoModule) {
	pkgs, err := s.packages(m, false)
	if err == nil && len(pkgs) == 0 {
		err = fmt.Errorf("a library module with no package to import")
	}
	if err != nil {
		s.fail(m, "list its packages", err)
		return
	}
	dir, err := s.consumerDir(m, pkgs)
	if err == nil {
		err = s.build(dir, m.Path)
	}
	if err != nil {
		s.fail(m, "a consumer outside the repository", err)
		return
	}
	fmt.Fprintf(s.out, "ok   %s: a consumer outside the repository gets, tidies, builds and vets its %d packages\n", m.Path, len(pkgs))
}

// consumerDir makes a consumer module in the run's directory whose
// main.go imports pkgs.
func (s *sim) consumerDir(m *repoModule, pkgs []string) (string, error) {
	name := strings.ReplaceAll(strings.TrimPrefix(m.Path, repoPath), "/", "-")
	dir := filepath.Join(s.work, "consumer"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var src strings.Builder
	src.WriteString("// A user of " + m.Path + ".\npackage main\n\nimport (\n")
	for _, p := range pkgs {
		src.WriteString("\t_ " + strconv.Quote(p) + "\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src.String()), 0o644); err != nil {
		return "", err
	}
	_, err := s.r.goCmd(dir, "mod", "init", "example.com/consumer"+strings.ReplaceAll(name, "-", "/"))
	return dir, err
}

// build runs the user's commands in the consumer dir, getting the
// module mod, and checks where the repository's modules came from.
func (s *sim) build(dir, mod string) error {
	for _, args := range [][]string{
		{"get", mod + "@" + s.v},
		{"mod", "tidy"},
		{"build", "./..."},
		{"vet", "./..."},
	} {
		if _, err := s.r.goCmd(dir, args...); err != nil {
			return err
		}
	}
	return s.checkOrigin(dir)
}

// checkOrigin checks that every module of the repository that the
// consumer in dir uses is the release's version, with the hash of the
// zip this run published: none came from another proxy or a cache.
func (s *sim) checkOrigin(dir string) error {
	list, err := s.r.goCmd(dir, "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && ours(f[0]) && f[1] != s.v {
			return fmt.Errorf("uses %s %s, not the release's %s", f[0], f[1], s.v)
		}
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(sum), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || !ours(f[0]) || strings.HasSuffix(f[1], "/go.mod") {
			continue
		}
		if want := s.proxy.hashes[f[0]]; f[2] != want {
			return fmt.Errorf("go.sum has %s %s %s; the zip published is %s", f[0], f[1], f[2], want)
		}
	}
	return nil
}

// install runs go install PKG@VERSION, from outside any module, for
// every main package of command module m.
func (s *sim) install(m *repoModule) {
	mains, err := s.packages(m, true)
	if err != nil {
		s.fail(m, "list its commands", err)
		return
	}
	bin := filepath.Join(s.work, "bin")
	for _, p := range mains {
		dir := filepath.Join(s.work, "install")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			s.fail(m, "go install", err)
			return
		}
		_, err := s.r.run(dir, []string{"GOBIN=" + bin}, "go", "install", p+"@"+s.v)
		if err == nil {
			_, err = os.Stat(filepath.Join(bin, path.Base(p)))
		}
		if err != nil {
			s.fail(m, "go install "+p+"@"+s.v, err)
			continue
		}
		fmt.Fprintf(s.out, "ok   %s: go install %s@%s\n", m.Path, p, s.v)
	}
}

// minimalClaimRE finds the docs' figure for a service that imports only
// outbox and store/mysql.
var minimalClaimRE = regexp.MustCompile("imports only `outbox` and `store/mysql` has (\\d+) (?:modules|lines) in `go list -m all`")

// countMinimal builds a consumer of outbox and store/mysql alone and
// checks its go list -m all against the figure README.md and
// docs/layout.md give: the library's module must not grow a user's
// module graph unnoticed.
func (s *sim) countMinimal() {
	root := s.t.module(repoPath)
	for _, dir := range []string{"outbox", "store/mysql"} {
		if _, err := os.Stat(filepath.Join(s.scratch, dir)); err != nil {
			return // another tree (a test's)
		}
	}
	dir, err := s.consumerDir(&repoModule{Path: repoPath + "/minimal"}, []string{repoPath + "/outbox", repoPath + "/store/mysql"})
	if err == nil {
		err = s.build(dir, repoPath)
	}
	var list string
	if err == nil {
		list, err = s.r.goCmd(dir, "list", "-m", "all")
	}
	if err != nil {
		s.fail(root, "a consumer of outbox and store/mysql", err)
		return
	}
	n := len(strings.Split(strings.TrimSpace(list), "\n"))
	fmt.Fprintf(s.out, "ok   a consumer of outbox and store/mysql alone lists %d modules in go list -m all\n", n)
	for _, doc := range []string{"README.md", "docs/layout.md"} {
		data, err := os.ReadFile(filepath.Join(s.scratch, filepath.FromSlash(doc)))
		if err != nil {
			continue
		}
		text := strings.Join(strings.Fields(string(data)), " ")
		for _, mm := range minimalClaimRE.FindAllStringSubmatch(text, -1) {
			if mm[1] != strconv.Itoa(n) {
				s.fail(root, doc, fmt.Errorf("says a module that imports only outbox and store/mysql has %s modules in go list -m all; it has %d:\n%s", mm[1], n, tail(list, 20)))
			}
		}
	}
}
