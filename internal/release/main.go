// Command release tags every module of the repository at one version,
// and simulates that release for CI.
//
// Release (from the repository's root, on a clean work tree whose
// CHANGELOG names the version):
//
//	go run ./internal/release -version v0.2.0 [-dry-run]
//
// sets every requirement of one of the repository's modules, in every
// go.mod, and the versions go.work replaces them at, to the version;
// publishes every module of that tree to a local file-system module
// proxy, one after the other (a module after those it requires), each
// after go mod tidy has added their hashes to its go.sum; builds every
// library module from a scratch consumer outside the repository and
// installs every command from the proxy (as -simulate does); then
// commits the go.mod, go.sum and go.work files, checks that each
// module's zip from that commit is the one it tested, and creates the
// tags: v0.2.0 for the root module, DIR/v0.2.0 for the module in DIR.
// It pushes nothing: it prints the git push command. With -dry-run it
// stops before the commit.
//
// Tidy every module (what cd DIR && go mod tidy was while go.mod files
// replaced their siblings: GOWORK=off, the siblings from the work tree):
//
//	go run ./internal/release -tidy
//
// Simulate (CI's step):
//
//	go run ./internal/release -simulate [-rev HEAD] [-version V] [-keep]
//
// publishes every module of commit REV (git archive: never the work
// tree) at the version its go.mod files require of each other, without
// changing any requirement, and then, with GOWORK=off, the local proxy
// first and a module cache of its own: for each library module a
// scratch consumer outside the repository runs go get, go mod tidy, go
// build and go vet on a file importing every package of the module; go
// install …@V installs each command; a consumer of outbox and
// store/mysql alone lists as many modules as README.md says. It fails
// when a go.mod requires one of the repository's modules at another
// version, or one that is not in the tree, or a test or tool module;
// when a go.mod replaces one; when go.work lacks a module; or when a
// module is not tidy.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	version := flag.String("version", "", "the release's version, e.g. v0.2.0 (with -simulate: default the one the go.mod files require)")
	simulate := flag.Bool("simulate", false, "simulate the release of -rev without changing anything")
	tidy := flag.Bool("tidy", false, "run go mod tidy in every module of the work tree, against the work tree's modules")
	rev := flag.String("rev", "HEAD", "with -simulate: the commit to simulate the release of")
	dryRun := flag.Bool("dry-run", false, "release: stop before the commit and the tags")
	keep := flag.Bool("keep", false, "keep the temporary directory (proxy, consumers, commands.log)")
	repo := flag.String("repo", ".", "the repository")
	flag.Parse()
	var err error
	switch {
	case *tidy:
		err = runTidy(*repo, os.Stdout)
	case *simulate:
		err = runSimulation(simOptions{Repo: *repo, Rev: *rev, Version: *version, Out: os.Stdout, Keep: *keep})
	default:
		err = runRelease(releaseOptions{Repo: *repo, Version: *version, DryRun: *dryRun, Keep: *keep, Out: os.Stdout})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// runSimulation simulates the release of o.Rev; an error says that it
// failed.
func runSimulation(o simOptions) error {
	s, err := newSim(o)
	if s != nil {
		defer s.close(o.Keep)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "simulating the release of %s at %s: %d modules, published to %s\n", o.Rev, s.v, len(s.t.Mods), fileURL(s.proxy.Dir))
	return s.run()
}

// run publishes every module, builds each library module from outside,
// installs each command and counts a minimal consumer's modules.
func (s *sim) run() error {
	s.checkRules()
	for _, m := range s.t.Mods {
		s.prepare(m)
	}
	libs, cmds := 0, 0
	for _, m := range s.t.Mods {
		before := len(s.fails)
		switch m.Kind {
		case library:
			s.consume(m)
		case command:
			s.install(m)
		default:
			continue
		}
		if len(s.fails) == before {
			if m.Kind == library {
				libs++
			} else {
				cmds++
			}
		}
	}
	s.countMinimal()
	nLibs, nCmds := s.count(library), s.count(command)
	fmt.Fprintf(s.out, "%d of %d library modules build from outside the repository; %d of %d command modules install\n", libs, nLibs, cmds, nCmds)
	if len(s.fails) > 0 {
		return fmt.Errorf("%d failure(s), the FAIL lines above", len(s.fails))
	}
	return nil
}

func (s *sim) count(k kind) int {
	n := 0
	for _, m := range s.t.Mods {
		if m.Kind == k {
			n++
		}
	}
	return n
}
