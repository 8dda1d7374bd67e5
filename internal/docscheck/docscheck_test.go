package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSpec stands for outboxctl in tests: two commands with their flags.
func fakeSpec(string) (*cliSpec, error) {
	return &cliSpec{flags: map[string]map[string]bool{
		"help":  {"json": true},
		"stats": {"dsn": true, "table": true, "json": true},
		"list":  {"dsn": true, "table": true, "status": true, "json": true},
	}}, nil
}

// repo writes a small repository: a root module, a library package, a
// main package with a -dsn flag, a nested module, and docs/target.md,
// plus the given files.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	base := map[string]string{
		"go.mod":                "module " + modulePath + "\n",
		"lib/lib.go":            "package lib\n",
		"cmd/tool/main.go":      "package main\n\nimport \"flag\"\n\nvar dsn = flag.String(\"dsn\", \"\", \"\")\n\nfunc init() { flag.StringVar(new(string), \"config\", \"\", \"\") }\n",
		"cmd/outboxctl/main.go": "package main\n",
		"cmd/shelled/main.go":   "package main\n\nimport \"" + modulePath + "/shell\"\n\nfunc main() { shell.Run() }\n",
		"shell/shell.go":        "package shell\n\nimport \"flag\"\n\nfunc Run() { flag.CommandLine.Bool(\"verbose\", false, \"\") }\n",
		"examples/go.mod":       "module " + modulePath + "/examples\n",
		"examples/app/a.go":     "package main\n",
		"examples/conf.yaml":    "x: 1\n",
		"docs/target.md":        "# Target\n\n## A `code` heading (with parens)\n\n## Twice\n\n## Twice\n",
	}
	for name, text := range files {
		base[name] = text
	}
	for name, text := range base {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// check runs the checker on README.md of a repository holding it.
func check(t *testing.T, readme string) []string {
	t.Helper()
	root := repo(t, map[string]string{"README.md": readme})
	c := &checker{root: root, outboxctl: fakeSpec}
	fs, err := c.checkFile("README.md", true)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

func TestGoodDocumentPasses(t *testing.T) {
	readme := strings.Join([]string{
		"# Title",
		"",
		"See [the target](docs/target.md), [a heading](docs/target.md#a-code-heading-with-parens),",
		"[the second Twice](docs/target.md#twice-1), [below](#a-section), [a dir](lib),",
		"[a line](lib/lib.go#L1), [outside](https://example.com/x#y) and `[not a link](nowhere.md)`.",
		"",
		"## A section",
		"",
		"```sh",
		"go run ./cmd/tool -dsn 'root@tcp(127.0.0.1:3306)/'   # a comment: [x](y)",
		"OUTBOXRELAY_TEST_MYSQL_DSN='root@tcp(127.0.0.1:3306)/' go test -race -count=1 " + modulePath + "/...",
		"go test -run 'A|B' -v ./lib/ | grep -E 'ok|FAIL'",
		"cd examples && go run ./app -x",
		"go install " + modulePath + "/cmd/tool@latest",
		"go run ./examples/app -config examples/conf.yaml",
		"go run ./cmd/shelled -verbose",
		"outboxctl stats --dsn 'x' --table t",
		"go run ./cmd/outboxctl list --status dead [--json] | --table t",
		"outboxctl help list",
		"for i in 1 2; do go test -count=1 ./lib/; done",
		"```",
		"",
		"```text",
		"$ outboxctl stats --tabel t",
		"```",
		"",
		"[ref]: docs/target.md#target",
	}, "\n")
	if got := check(t, readme); len(got) != 0 {
		t.Errorf("findings in a good document:\n%s", strings.Join(got, "\n"))
	}
}

func TestFindings(t *testing.T) {
	cases := []struct {
		name, readme, want string
	}{
		{"dead link", "See [it](docs/missing.md).", `README.md:1: link "docs/missing.md": docs/missing.md does not exist`},
		{"dead link across lines", "Line one\nsee [the\nthing](nowhere/x.md).", `README.md:2: link "nowhere/x.md"`},
		{"dead reference definition", "[x]: docs/gone.md", `docs/gone.md does not exist`},
		{"dead anchor in another file", "See [it](docs/target.md#no-such-heading).", `no heading or anchor "no-such-heading" in docs/target.md`},
		{"dead anchor in this file", "# T\n\nSee [it](#t-2).", `README.md:3: link "#t-2": no heading or anchor "t-2" in this file`},
		{"anchor in a directory", "See [it](lib#x).", `lib is not a Markdown file`},
		{"link out of the repository", "See [it](../x.md).", `leaves the repository`},
		{"go run of a missing package", "```sh\ngo run ./cmd/gone\n```", `README.md:2: go run ./cmd/gone: no directory cmd/gone in the repository`},
		{"go test of a missing import path", "```bash\ngo test " + modulePath + "/gone/...\n```", `no directory gone in the repository`},
		{"go run of a library", "```sh\ngo run ./lib\n```", `go run ./lib: lib is not a main package`},
		{"go build of a directory without Go", "```sh\ngo build ./docs\n```", `no Go files in docs`},
		{"a flag the program lacks", "```sh\ngo run ./cmd/tool -dsm x\n```", `go run ./cmd/tool: the program has no flag -dsm`},
		{"a flag neither the program nor its shell has", "```sh\ngo run ./cmd/shelled -verbos\n```", `go run ./cmd/shelled: the program has no flag -verbos`},
		{"a missing config file", "```sh\ngo run ./cmd/tool -config nothere.yaml\n```", `-config nothere.yaml: no nothere.yaml in the repository`},
		{"a missing compose file", "```sh\ndocker compose -f examples/nothere.yaml up\n```", `-f examples/nothere.yaml: no examples/nothere.yaml`},
		{"cd to a missing directory", "```sh\ncd nowhere && go test ./...\n```", `cd nowhere: no directory nowhere`},
		{"a path relative to cd", "```sh\ncd examples && go run ./cmd/tool\n```", `no directory examples/cmd/tool`},
		{"GOWORK=off across modules", "```sh\nGOWORK=off go run ./examples/app\n```", `with GOWORK=off, examples/app is not in the module of .`},
		{"an outboxctl command it lacks", "```sh\noutboxctl stat --table t\n```", `outboxctl stat: no such command`},
		{"an outboxctl flag it lacks", "```sh\noutboxctl stats --tabel t\n```", `outboxctl stats: no flag --tabel (it has --dsn, --json, --table)`},
		{"an outboxctl flag after a synopsis's or", "```sh\ngo run ./cmd/outboxctl list | --state dead\n```", `outboxctl list: no flag --state`},
		{"outboxctl help of a missing command", "```console\n$ outboxctl help lst\nusage: …\n```", `outboxctl help lst: no such command`},
		{"a flag before the outboxctl command", "```sh\noutboxctl --json stats\n```", `flag --json before the command`},
		{"a missing script", "```sh\n.ci/services\n```", `.ci/services: no file .ci/services in the repository`},
		{"a script relative to cd", "```sh\ncd examples && ./conf.yaml/x\n```", `no file examples/conf.yaml/x`},
		{"a coverage figure", "The worker's tests (`go test -cover ./lib` gives\n91.8%) run alone.", `README.md:2: a coverage figure`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := check(t, tc.readme)
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("findings:\n%s\nwant one containing %q", strings.Join(got, "\n"), tc.want)
			}
		})
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start":                           "quick-start",
		"room-service (`examples/roomservice`)": "room-service-examplesroomservice",
		"activity-service (`examples/activityservice`): the consuming side in a service": "activity-service-examplesactivityservice-the-consuming-side-in-a-service",
		"The operator's dashboard":            "the-operators-dashboard",
		"`outboxctl`":                         "outboxctl",
		"Metrics, dashboard and alerts":       "metrics-dashboard-and-alerts",
		"The [inbox](docs/inbox.md) **now**":  "the-inbox-now",
		"`outbox_worker` and `WorkerOptions`": "outbox_worker-and-workeroptions",
		"Größe & Ordnung":                     "größe--ordnung",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestParseOutboxctlUsage(t *testing.T) {
	usage := "usage: outboxctl <command> [flags]\n\n  consumers list, add and remove\n  stats     the backlog\n  help      a command's usage\n\nflags of every command: --dsn\n"
	if got := strings.Join(parseCommands(usage), ","); got != "consumers,stats,help" {
		t.Errorf("commands: %s", got)
	}
	flags := parseFlags("usage: outboxctl list\n\nflags:\n  -after int\n    \tpage\n  -dsn string\n    \tDSN\n  -json\n    \tJSON\n")
	if len(flags) != 3 || !flags["after"] || !flags["dsn"] || !flags["json"] {
		t.Errorf("flags: %v", flags)
	}
}

// A repository with a workspace: the root module, a library module in
// sub/ and the examples, requiring each other at v0.2.0.
var workspace = map[string]string{
	"go.work":         "go 1.26.0\n\nuse (\n\t.\n\t./examples // the examples\n\t./sub\n)\n",
	"sub/go.mod":      "module " + modulePath + "/sub\n\nrequire " + modulePath + " v0.2.0\n",
	"sub/s.go":        "package sub\n",
	"examples/go.mod": "module " + modulePath + "/examples\n\nrequire (\n\t" + modulePath + " v0.2.0\n\t" + modulePath + "/sub v0.2.0\n)\n",
	"docs/layout.md": "# Layout\n\n| path | holds |\n| --- | --- |\n| **`/`** | **module `" + modulePath + "`** |\n" +
		"| `lib/` | a package |\n| **`sub/`** | **module: sub** |\n| **`examples/`** | **module: the examples** |\n",
	"docs/upgrades.md": "# Versions\n\n## Modules and tags\n\n| module | what | tag |\n| --- | --- | --- |\n" +
		"| `" + modulePath + "` | the library | `v0.2.0` |\n| `…/sub` | sub | `sub/v0.2.0` |\n| `…/examples` | the examples | `examples/v0.2.0` |\n\n## Upgrading\n\n| a | b | c |\n| --- | --- | --- |\n| x | y | z |\n",
}

// runIn runs every check on a repository of workspace with changes.
func runIn(t *testing.T, changes map[string]string) []string {
	t.Helper()
	files := map[string]string{}
	for k, v := range workspace {
		files[k] = v
	}
	for k, v := range changes {
		files[k] = v
	}
	root := repo(t, files)
	c := &checker{root: root, outboxctl: fakeSpec}
	var out []string
	for _, f := range []string{"README.md", "docs/layout.md", "docs/upgrades.md"} {
		if !c.exists(f) {
			continue
		}
		fs, err := c.checkFile(f, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range fs {
			out = append(out, x.String())
		}
	}
	fs, err := c.checkModuleLists()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range fs {
		out = append(out, x.String())
	}
	return out
}

func TestModules(t *testing.T) {
	if got := runIn(t, map[string]string{"README.md": "```sh\ngo get " + modulePath + "/sub@v0.2.0\n```\n"}); len(got) != 0 {
		t.Fatalf("findings in a good repository:\n%s", strings.Join(got, "\n"))
	}
	for _, tc := range []struct {
		name    string
		changes map[string]string
		want    string
	}{
		{"install at latest", map[string]string{"README.md": "```sh\ngo get " + modulePath + "/sub@latest\n```\n"},
			`README.md:2: go get/install ` + modulePath + `/sub@latest: name the release's version, v0.2.0`},
		{"install inline at an old version", map[string]string{"README.md": "Install it (`go install\n" + modulePath + "/cmd/outboxctl@v0.1.0`).\n"},
			`README.md:1: go get/install ` + modulePath + `/cmd/outboxctl@v0.1.0`},
		{"layout lacks a module", map[string]string{"docs/layout.md": strings.Replace(workspace["docs/layout.md"], "| **`sub/`** | **module: sub** |\n", "", 1)},
			`docs/layout.md:1: its module rows (**module…**) lack the module sub, which go.work uses`},
		{"layout names a module go.work lacks", map[string]string{"docs/layout.md": workspace["docs/layout.md"] + "| **`gone/`** | **module: gone** |\n"},
			`docs/layout.md:9: its module rows (**module…**) name gone, which is no module go.work uses`},
		{"upgrades lacks a module", map[string]string{"docs/upgrades.md": strings.Replace(workspace["docs/upgrades.md"], "| `…/sub` | sub | `sub/v0.2.0` |\n", "", 1)},
			`docs/upgrades.md:1: its table of modules and tags lack the module sub`},
		{"a tag at another version", map[string]string{"docs/upgrades.md": strings.Replace(workspace["docs/upgrades.md"], "`sub/v0.2.0`", "`sub/v0.1.0`", 1)},
			`docs/upgrades.md:8: tag sub/v0.1.0: the release is v0.2.0`},
		{"a tag of another module", map[string]string{"docs/upgrades.md": strings.Replace(workspace["docs/upgrades.md"], "`sub/v0.2.0`", "`examples/v0.2.0`", 1)},
			`docs/upgrades.md:8: tag examples/v0.2.0: no module of its row is in examples`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := runIn(t, tc.changes)
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Errorf("findings:\n%s\nwant one containing %q", strings.Join(got, "\n"), tc.want)
			}
		})
	}
}
