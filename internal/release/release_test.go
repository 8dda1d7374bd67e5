package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A small repository of the same shape as this one: the root module
// (a library), a library module in a subdirectory, a command, and a
// test helper under internal/, all requiring each other at v0.9.0, with
// go.work for development. Nothing outside it is needed, so the go
// command reads no network (GOPROXY=off for the machine's proxies).
var goodRepo = map[string]string{
	"LICENSE":                   "MIT\n",
	"go.mod":                    "module " + repoPath + "\n\ngo 1.26.0\n",
	"lib/lib.go":                "// Package lib is the library.\npackage lib\n\n// Hello says hello.\nfunc Hello() string { return \"hello\" }\n",
	"internal/x/x.go":           "package x\n",
	"sub/a/go.mod":              "module " + repoPath + "/sub/a\n\ngo 1.26.0\n\nrequire " + repoPath + " v0.9.0\n",
	"sub/a/a.go":                "// Package a uses lib.\npackage a\n\nimport \"" + repoPath + "/lib\"\n\n// Hello says hello.\nfunc Hello() string { return lib.Hello() }\n",
	"cmd/tool/go.mod":           "module " + repoPath + "/cmd/tool\n\ngo 1.26.0\n\nrequire " + repoPath + "/sub/a v0.9.0\n\nrequire " + repoPath + " v0.9.0 // indirect\n",
	"cmd/tool/main.go":          "package main\n\nimport (\n\t\"fmt\"\n\n\t\"" + repoPath + "/sub/a\"\n)\n\nfunc main() { fmt.Println(a.Hello()) }\n",
	"internal/helper/go.mod":    "module " + repoPath + "/internal/helper\n\ngo 1.26.0\n",
	"internal/helper/helper.go": "// Package helper helps tests.\npackage helper\n",
	"go.work": "go 1.26.0\n\nuse (\n\t.\n\t./cmd/tool\n\t./internal/helper\n\t./sub/a\n)\n\nreplace (\n" +
		"\t" + repoPath + " v0.9.0 => .\n" +
		"\t" + repoPath + "/cmd/tool v0.9.0 => ./cmd/tool\n" +
		"\t" + repoPath + "/internal/helper v0.9.0 => ./internal/helper\n" +
		"\t" + repoPath + "/sub/a v0.9.0 => ./sub/a\n)\n",
}

// makeRepo writes files (goodRepo with changes; "" deletes a file) into
// a new git repository with one commit, and returns its directory.
func makeRepo(t *testing.T, changes map[string]string) string {
	t.Helper()
	t.Setenv("GOPROXY", "off")
	t.Setenv("GOFLAGS", "")
	dir := t.TempDir()
	files := map[string]string{}
	for k, v := range goodRepo {
		files[k] = v
	}
	for k, v := range changes {
		files[k] = v
	}
	for name, text := range files {
		if text == "" {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &runner{}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "one"}} {
		if _, err := r.scratchGit(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// repoAt is goodRepo with its modules requiring each other at v.
func repoAt(t *testing.T, v string) string {
	t.Helper()
	changes := map[string]string{}
	for _, f := range []string{"sub/a/go.mod", "cmd/tool/go.mod", "go.work"} {
		changes[f] = strings.ReplaceAll(goodRepo[f], "v0.9.0", v)
	}
	return makeRepo(t, changes)
}

// simulate runs the simulation of repo's HEAD and returns its output.
func simulate(t *testing.T, repo string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := runSimulation(simOptions{Repo: repo, Rev: "HEAD", Out: &out})
	t.Log("\n" + out.String())
	return out.String(), err
}

func TestSimulationPasses(t *testing.T) {
	out, err := simulate(t, makeRepo(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ok   " + repoPath + ": a consumer outside the repository gets, tidies, builds and vets its 1 packages",
		"ok   " + repoPath + "/sub/a: a consumer",
		"ok   " + repoPath + "/cmd/tool: go install " + repoPath + "/cmd/tool@v0.9.0",
		"2 of 2 library modules build from outside the repository; 1 of 1 command modules install",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

// Each way a release can break for its users fails the simulation,
// with a line that names it, and the user's command fails too.
func TestSimulationFails(t *testing.T) {
	for _, c := range []struct {
		name    string
		changes map[string]string
		want    []string
	}{
		{
			name:    "a sibling at another version",
			changes: map[string]string{"sub/a/go.mod": strings.Replace(goodRepo["sub/a/go.mod"], "v0.9.0", "v0.8.0", 1)},
			want: []string{
				"FAIL " + repoPath + "/sub/a: go.mod: requires " + repoPath + " v0.8.0; the release is v0.9.0",
				"FAIL " + repoPath + "/sub/a: a consumer outside the repository: go get",
			},
		},
		{
			name: "a test helper required",
			changes: map[string]string{
				"sub/a/go.mod":    goodRepo["sub/a/go.mod"] + "\nrequire " + repoPath + "/internal/helper v0.9.0\n",
				"sub/a/a_test.go": "package a\n\nimport _ \"" + repoPath + "/internal/helper\"\n",
			},
			want: []string{"FAIL " + repoPath + "/sub/a: go.mod: requires " + repoPath + "/internal/helper, a tool module (under internal/): a published library must not"},
		},
		{
			name:    "an unpublished version of a helper",
			changes: map[string]string{"sub/a/go.mod": goodRepo["sub/a/go.mod"] + "\nrequire " + repoPath + "/internal/pgtest v0.0.0-00010101000000-000000000000\n"},
			want: []string{
				"FAIL " + repoPath + "/sub/a: go.mod: requires " + repoPath + "/internal/pgtest v0.0.0-00010101000000-000000000000, which is no module of this tree",
				"FAIL " + repoPath + "/sub/a: go mod tidy",
			},
		},
		{
			name:    "a replace of a sibling",
			changes: map[string]string{"cmd/tool/go.mod": goodRepo["cmd/tool/go.mod"] + "\nreplace " + repoPath + "/sub/a => ../../sub/a\n"},
			want: []string{
				"FAIL " + repoPath + "/cmd/tool: go.mod: replaces " + repoPath + "/sub/a => ../../sub/a",
				"FAIL " + repoPath + "/cmd/tool: go install " + repoPath + "/cmd/tool@v0.9.0",
				"replace directives",
			},
		},
		{
			name:    "a module go.work lacks",
			changes: map[string]string{"go.work": strings.Replace(goodRepo["go.work"], "\t./sub/a\n", "", 1)},
			want:    []string{"FAIL " + repoPath + ": go.work: does not use sub/a"},
		},
		{
			name:    "an untidy module",
			changes: map[string]string{"sub/a/go.mod": strings.Replace(goodRepo["sub/a/go.mod"], "require "+repoPath+" v0.9.0\n", "", 1)},
			want:    []string{"FAIL " + repoPath + "/sub/a: go mod tidy: the module is not tidy", "+ require " + repoPath + " v0.9.0"},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := simulate(t, makeRepo(t, c.changes))
			if err == nil {
				t.Fatal("the simulation passed")
			}
			for _, want := range c.want {
				if !strings.Contains(out, want) {
					t.Errorf("the output lacks %q", want)
				}
			}
		})
	}
}

// TestRelease releases a repository whose modules require each other at
// v0.8.0 as v0.9.0: one commit that requires v0.9.0 everywhere, with
// go.sum lines, and a tag per module on it; the modules then install
// from that commit.
func TestRelease(t *testing.T) {
	repo := repoAt(t, "v0.8.0")
	var out bytes.Buffer
	err := runRelease(releaseOptions{Repo: repo, Version: "v0.9.0", Out: &out})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatal(err)
	}
	tags, _ := gitOutput(repo, "tag", "--points-at", "HEAD")
	if got, want := strings.Fields(tags), []string{"cmd/tool/v0.9.0", "internal/helper/v0.9.0", "sub/a/v0.9.0", "v0.9.0"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("tags at HEAD: %v; want %v", got, want)
	}
	for f, want := range map[string]string{
		"sub/a/go.mod":    "require " + repoPath + " v0.9.0",
		"cmd/tool/go.mod": repoPath + "/sub/a v0.9.0",
		"cmd/tool/go.sum": repoPath + "/sub/a v0.9.0 h1:",
		"go.work":         repoPath + "/sub/a v0.9.0 => ./sub/a",
	} {
		data, _ := os.ReadFile(filepath.Join(repo, filepath.FromSlash(f)))
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q:\n%s", f, want, data)
		}
	}
	if st, _ := gitOutput(repo, "status", "--porcelain"); st != "" {
		t.Errorf("the work tree is not clean:\n%s", st)
	}
	// The released tree passes the simulation as it is.
	if _, err := simulate(t, repo); err != nil {
		t.Fatal(err)
	}
	// A second release of the same version is refused.
	err = runRelease(releaseOptions{Repo: repo, Version: "v0.9.0", Out: &out})
	if err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("a second release at v0.9.0: %v", err)
	}
}

// TestCycle: modules that require each other in a cycle cannot be
// released one after the other.
func TestCycle(t *testing.T) {
	repo := makeRepo(t, map[string]string{"sub/a/go.mod": goodRepo["sub/a/go.mod"] + "\nrequire " + repoPath + "/cmd/tool v0.9.0\n"})
	_, err := simulate(t, repo)
	if err == nil || !strings.Contains(err.Error(), "cycle") {
		t.Fatalf("a cycle: %v", err)
	}
}

func TestReleaseRefuses(t *testing.T) {
	repo := makeRepo(t, nil)
	if err := runRelease(releaseOptions{Repo: repo, Version: "0.9", Out: &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), "semantic version") {
		t.Errorf("version 0.9: %v", err)
	}
	if err := os.WriteFile(filepath.Join(repo, "lib", "new.go"), []byte("package lib\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runRelease(releaseOptions{Repo: repo, Version: "v0.9.0", Out: &bytes.Buffer{}}); err == nil || !strings.Contains(err.Error(), "not clean") {
		t.Errorf("a dirty tree: %v", err)
	}
}

// TestTidy: -tidy tidies every module against the work tree's siblings,
// and leaves the repository's own hashes out of go.sum.
func TestTidy(t *testing.T) {
	repo := makeRepo(t, map[string]string{"cmd/tool/go.mod": strings.Replace(goodRepo["cmd/tool/go.mod"], "\nrequire "+repoPath+" v0.9.0 // indirect\n", "", 1)})
	var out bytes.Buffer
	if err := runTidy(repo, &out); err != nil {
		t.Fatal(err)
	}
	mod, _ := os.ReadFile(filepath.Join(repo, "cmd", "tool", "go.mod"))
	if !strings.Contains(string(mod), repoPath+" v0.9.0 // indirect") {
		t.Errorf("cmd/tool/go.mod was not tidied:\n%s", mod)
	}
	if _, err := os.Stat(filepath.Join(repo, "cmd", "tool", "go.sum")); !os.IsNotExist(err) {
		t.Errorf("cmd/tool/go.sum holds the repository's hashes (stat: %v)", err)
	}
}

// TestTidyAfterARelease: the go.sum lines of the last release stay (the
// work tree's zips have other hashes), and the tidy still runs.
func TestTidyAfterARelease(t *testing.T) {
	repo := repoAt(t, "v0.8.0")
	if err := runRelease(releaseOptions{Repo: repo, Version: "v0.9.0", Out: &bytes.Buffer{}}); err != nil {
		t.Fatal(err)
	}
	sumFile := filepath.Join(repo, "cmd", "tool", "go.sum")
	released, _ := os.ReadFile(sumFile)
	if err := os.WriteFile(filepath.Join(repo, "lib", "more.go"), []byte("package lib\n\n// More is new.\nconst More = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := runTidy(repo, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(sumFile); string(now) != string(released) {
		t.Errorf("cmd/tool/go.sum changed:\n%s\nwas:\n%s", now, released)
	}
}
