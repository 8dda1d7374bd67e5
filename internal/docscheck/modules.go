package main

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The checks of what the documents say about the modules: which there
// are (against go.work), the version the install lines name (against
// the go.mod files), and no coverage figure, which goes stale with
// every change (the command that measures it stays true).

// workModules reads the directories go.work uses, relative to the root
// and slash-separated ("." for the root module); none without a go.work.
func (c *checker) workModules() ([]string, error) {
	b, err := os.ReadFile(filepath.Join(c.root, "go.work"))
	if os.IsNotExist(err) {
		return nil, nil // one module, no workspace: nothing to list
	}
	if err != nil {
		return nil, err
	}
	var dirs []string
	inUse := false
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case inUse && f[0] == ")":
			inUse = false
		case inUse:
			dirs = append(dirs, path.Clean(strings.Trim(f[0], `"`)))
		case f[0] == "use" && len(f) > 1 && f[1] == "(":
			inUse = true
		case f[0] == "use" && len(f) > 1:
			dirs = append(dirs, path.Clean(strings.Trim(f[1], `"`)))
		}
	}
	sort.Strings(dirs)
	return dirs, nil
}

// requireRE matches a go.mod requirement of one of the repository's
// modules, and its version.
var requireRE = regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(modulePath) + `(?:/\S+)?\s+(v\S+)`)

// releaseVersion is the version the modules' go.mod files require of
// each other: the one most of their requirements name (the lower on a
// tie; the release simulation fails on the others), or "" when no module
// requires another.
func (c *checker) releaseVersion() (string, error) {
	dirs, err := c.workModules()
	if err != nil {
		return "", err
	}
	count := map[string]int{}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(d), "go.mod"))
		if err != nil {
			return "", err
		}
		for _, m := range requireRE.FindAllStringSubmatch(string(b), -1) {
			count[m[1]]++
		}
	}
	best := ""
	for v, n := range count {
		if best == "" || n > count[best] || n == count[best] && v < best {
			best = v
		}
	}
	return best, nil
}

// installRE matches go get or go install of one of the repository's
// modules at a version, in a fenced block or inline code.
var installRE = regexp.MustCompile(`go\s+(?:get|install)\s+(?:-\S+\s+)*(` + regexp.QuoteMeta(modulePath) + `(?:/[^@\s` + "`" + `]*)?)@([^\s` + "`" + `]+)`)

// checkInstallVersions: every go get or go install of one of the
// repository's modules names the version the go.mod files require of
// each other, the one the release tags (not @latest, which names
// whatever was tagged last, or nothing before the first tag).
func (c *checker) checkInstallVersions(file string, d *doc) ([]finding, error) {
	rv, err := c.releaseVersion()
	if err != nil || rv == "" {
		return nil, err // a tree without releases
	}
	var out []finding
	for _, m := range installRE.FindAllStringSubmatchIndex(d.text, -1) {
		if v := d.text[m[4]:m[5]]; v != rv {
			out = append(out, finding{file, lineAt(d.text, m[0]), fmt.Sprintf("go get/install %s@%s: name the release's version, %s (what the go.mod files require of each other)", d.text[m[2]:m[3]], v, rv)})
		}
	}
	return out, nil
}

// coverageRE matches a coverage figure: a percentage soon after
// "-cover" or "coverage".
var coverageRE = regexp.MustCompile(`(?s)(?:-cover|[Cc]overage)[^%]{0,120}?\d+(?:\.\d+)?\s?%`)

// checkCoverage finds coverage figures, which change with every change
// of the code they measure.
func checkCoverage(file string, d *doc) []finding {
	var out []finding
	for _, m := range coverageRE.FindAllStringIndex(d.text, -1) {
		out = append(out, finding{file, lineAt(d.text, m[1]), "a coverage figure: it goes stale with every change; give the command that measures it instead"})
	}
	return out
}

func lineAt(text string, off int) int { return 1 + strings.Count(text[:off], "\n") }

// The documents that list the modules: layout.md's table marks each
// module's row "**module…", upgrades.md's "Modules and tags" table names
// every module and its tag.
const (
	layoutDoc   = "docs/layout.md"
	upgradesDoc = "docs/upgrades.md"
)

var (
	moduleRowRE = regexp.MustCompile("^\\|\\s*\\*\\*`([^`]+)`\\*\\*\\s*\\|\\s*\\*\\*module")
	codeRE      = regexp.MustCompile("`([^`]+)`")
)

// checkModuleLists checks layout.md's and upgrades.md's module lists
// against go.work, and upgrades.md's tags against the release's version.
func (c *checker) checkModuleLists() ([]finding, error) {
	dirs, err := c.workModules()
	if err != nil {
		return nil, err
	}
	rv, err := c.releaseVersion()
	if err != nil {
		return nil, err
	}
	var out []finding
	if c.exists(layoutDoc) {
		d, err := c.parse(layoutDoc)
		if err != nil {
			return nil, err
		}
		listed := map[string]int{}
		for i, line := range strings.Split(d.text, "\n") {
			if m := moduleRowRE.FindStringSubmatch(line); m != nil {
				listed[moduleDir(m[1])] = i + 1
			}
		}
		out = append(out, compareLists(layoutDoc, "its module rows (**module…**)", listed, dirs)...)
	}
	if c.exists(upgradesDoc) {
		d, err := c.parse(upgradesDoc)
		if err != nil {
			return nil, err
		}
		listed, fs := tagTable(d.text, rv)
		out = append(out, fs...)
		out = append(out, compareLists(upgradesDoc, "its table of modules and tags", listed, dirs)...)
	}
	return out, nil
}

// moduleDir turns a module's name as the docs write it (a directory
// with or without a trailing slash, "/" for the root, the module path,
// or "…/DIR") into its directory.
func moduleDir(s string) string {
	s = strings.TrimPrefix(s, "…/")
	s = strings.TrimPrefix(strings.TrimPrefix(s, modulePath), "/")
	s = strings.TrimSuffix(s, "/")
	if s == "" {
		return "."
	}
	return s
}

// tagTable reads upgrades.md's table under "## Modules and tags": the
// modules of each row's first cell, and its tags, which must be each
// module's directory and the release's version (findings otherwise).
func tagTable(text string, version string) (map[string]int, []finding) {
	listed := map[string]int{}
	var out []finding
	lines := strings.Split(text, "\n")
	in := false
	for i, line := range lines {
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == "## Modules and tags"
			continue
		}
		cells := strings.Split(line, "|")
		if !in || len(cells) < 5 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "module" {
			continue
		}
		row := map[string]bool{}
		for _, m := range codeRE.FindAllStringSubmatch(cells[1], -1) {
			row[moduleDir(m[1])] = true
			listed[moduleDir(m[1])] = i + 1
		}
		for _, m := range codeRE.FindAllStringSubmatch(cells[3], -1) {
			dir, v := ".", m[1]
			if j := strings.LastIndex(m[1], "/"); j >= 0 {
				dir, v = m[1][:j], m[1][j+1:]
			}
			if !row[dir] {
				out = append(out, finding{upgradesDoc, i + 1, "tag " + m[1] + ": no module of its row is in " + dir})
			}
			if version != "" && v != version {
				out = append(out, finding{upgradesDoc, i + 1, "tag " + m[1] + ": the release is " + version + " (what the go.mod files require of each other)"})
			}
		}
	}
	return listed, out
}

// compareLists reports the modules go.work uses that a document's list
// lacks, and those it lists that go.work does not use.
func compareLists(file, what string, listed map[string]int, dirs []string) []finding {
	var out []finding
	inWork := map[string]bool{}
	for _, d := range dirs {
		inWork[d] = true
		if listed[d] == 0 {
			out = append(out, finding{file, 1, what + " lack the module " + d + ", which go.work uses"})
		}
	}
	var extra []string
	for d := range listed {
		if !inWork[d] {
			extra = append(extra, d)
		}
	}
	sort.Strings(extra)
	for _, d := range extra {
		out = append(out, finding{file, listed[d], what + " name " + d + ", which is no module go.work uses"})
	}
	return out
}
