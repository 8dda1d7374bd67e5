package main

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// repoPath is the root module's path; every other module of the
// repository lives under it, at its directory's path.
const repoPath = "github.com/outboxrelay/outboxrelay"

// ours reports whether a module path is one of the repository's.
func ours(p string) bool { return p == repoPath || strings.HasPrefix(p, repoPath+"/") }

// kind says what a module is to its users.
type kind int

const (
	// library: a module whose packages services import; published, and
	// built by a scratch consumer outside the repository.
	library kind = iota
	// command: a module under cmd/, installed with go install …@version.
	command
	// tool: the examples, benchmarks, test programs and suites. Tagged
	// with the rest, but no published module may require one.
	tool
)

func (k kind) String() string { return [...]string{"library", "command", "tool"}[k] }

// tools are the modules outside internal/ and cmd/ that are not
// libraries, and why. A new module is a library unless it is listed
// here, so that the release simulation builds it from outside.
var tools = map[string]string{
	"bench":                  "the benchmark command",
	"bench/postgres":         "the PostgreSQL benchmark command",
	"examples":               "the examples: room-service, activity-service, the quick start",
	"outbox/outboxui/uitest": "the dashboard's browser test",
}

// repoModule is one module of a tree.
type repoModule struct {
	Dir  string // relative to the tree's root, slash-separated; "." for the root module
	Path string
	File *modfile.File
	Kind kind
}

// Tag is the git tag of the module's version v: v for the root module,
// DIR/v for the others (the go command's convention for a module in a
// subdirectory).
func (m *repoModule) Tag(v string) string {
	if m.Dir == "." {
		return v
	}
	return m.Dir + "/" + v
}

// tree is the modules of a checkout, in an order where each module comes
// after every module of the tree that it requires.
type tree struct {
	Root string // absolute
	Mods []*repoModule
}

// loadTree reads every go.mod under root (none under testdata), given
// relative to root by files.
func loadTree(root string, files []string) (*tree, error) {
	t := &tree{Root: root}
	byPath := map[string]*repoModule{}
	for _, f := range files {
		if path.Base(f) != "go.mod" || strings.Contains("/"+f, "/testdata/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, err
		}
		mf, err := modfile.Parse(f, data, nil)
		if err != nil {
			return nil, err
		}
		if mf.Module == nil {
			return nil, fmt.Errorf("%s: no module line", f)
		}
		m := &repoModule{Dir: path.Dir(f), Path: mf.Module.Mod.Path, File: mf}
		m.Kind = kindOf(m.Dir)
		if want := path.Join(repoPath, m.Dir); m.Path != want && m.Dir != "." || m.Dir == "." && m.Path != repoPath {
			return nil, fmt.Errorf("%s: module %s; want %s (a module's path is its directory's)", f, m.Path, want)
		}
		byPath[m.Path] = m
		t.Mods = append(t.Mods, m)
	}
	if byPath[repoPath] == nil {
		return nil, fmt.Errorf("no go.mod of %s at the root of %s", repoPath, root)
	}
	return t, t.sort(byPath)
}

func kindOf(dir string) kind {
	switch {
	case dir == ".":
		return library
	case strings.HasPrefix(dir, "cmd/"):
		return command
	case tools[dir] != "" || strings.Contains("/"+dir+"/", "/internal/"):
		return tool
	}
	return library
}

// sort orders t.Mods so that a module comes after those it requires
// (and by directory otherwise); a cycle is an error, since no release
// could tag it.
func (t *tree) sort(byPath map[string]*repoModule) error {
	sort.Slice(t.Mods, func(i, j int) bool { return t.Mods[i].Dir < t.Mods[j].Dir })
	state := map[*repoModule]int{} // 1: visiting, 2: done
	var out []*repoModule
	var visit func(m *repoModule, via []string) error
	visit = func(m *repoModule, via []string) error {
		switch state[m] {
		case 1:
			return fmt.Errorf("the modules require each other in a cycle: %s", strings.Join(append(via, m.Path), " → "))
		case 2:
			return nil
		}
		state[m] = 1
		for _, r := range m.File.Require {
			if dep := byPath[r.Mod.Path]; dep != nil {
				if err := visit(dep, append(via, m.Path)); err != nil {
					return err
				}
			}
		}
		state[m] = 2
		out = append(out, m)
		return nil
	}
	for _, m := range t.Mods {
		if err := visit(m, nil); err != nil {
			return err
		}
	}
	t.Mods = out
	return nil
}

// module returns the tree's module of path p, or nil.
func (t *tree) module(p string) *repoModule {
	for _, m := range t.Mods {
		if m.Path == p {
			return m
		}
	}
	return nil
}

// abs is the absolute directory of m.
func (t *tree) abs(m *repoModule) string { return filepath.Join(t.Root, filepath.FromSlash(m.Dir)) }

// releaseVersion is the version the tree's modules require of each
// other: the one the most requirements name (the
// lower on a tie). "" when no module requires another.
func (t *tree) releaseVersion() string {
	count := map[string]int{}
	for _, m := range t.Mods {
		for _, r := range m.File.Require {
			if ours(r.Mod.Path) {
				count[r.Mod.Version]++
			}
		}
	}
	best := ""
	for v, n := range count {
		if best == "" || n > count[best] || n == count[best] && v < best {
			best = v
		}
	}
	return best
}

// withoutOurSums returns go.sum's lines minus those of the repository's
// own modules: those are the hashes of the release's zips, which the
// release (and its simulation) computes afresh.
func withoutOurSums(sum []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.SplitAfter(string(sum), "\n") {
		if f := strings.Fields(line); len(f) > 0 && ours(f[0]) {
			continue
		}
		out.WriteString(line)
	}
	return out.Bytes()
}

// ourSums returns go.sum's lines of the repository's own modules.
func ourSums(sum []byte) []string {
	var out []string
	for _, line := range strings.Split(string(sum), "\n") {
		if f := strings.Fields(line); len(f) > 0 && ours(f[0]) {
			out = append(out, line)
		}
	}
	return out
}

// mergeSums adds lines to a go.sum, in the go command's order (by
// module path, then by semantic version, "/go.mod" after the zip's
// line): with no lines to add, sum as it is.
func mergeSums(sum []byte, lines []string) []byte {
	if len(lines) == 0 {
		return sum
	}
	type entry struct {
		mv   module.Version
		line string
	}
	var all []entry
	for _, l := range append(strings.Split(string(sum), "\n"), lines...) {
		if f := strings.Fields(l); len(f) == 3 && !slices.ContainsFunc(all, func(e entry) bool { return e.line == l }) {
			all = append(all, entry{module.Version{Path: f[0], Version: f[1]}, l})
		}
	}
	mvs := make([]module.Version, len(all))
	byVersion := map[module.Version]string{}
	for i, e := range all {
		mvs[i] = e.mv
		byVersion[e.mv] = e.line
	}
	module.Sort(mvs)
	var out strings.Builder
	for _, mv := range mvs {
		out.WriteString(byVersion[mv] + "\n")
	}
	return []byte(out.String())
}
