package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// runTidy runs go mod tidy in every module of the work tree, as the
// release will see them: GOWORK=off, the repository's modules from a
// local proxy holding the work tree's files at the version the go.mod
// files require (a module after those it requires). It is what cd DIR
// && go mod tidy was while go.mod files replaced their siblings. The
// hashes of the repository's own modules in go.sum stay as they were:
// only a release knows them.
func runTidy(repo string, out io.Writer) error {
	repo, err := gitOutput(repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	files, err := gitOutput(repo, "ls-files", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return err
	}
	t, err := loadTree(repo, strings.Fields(files))
	if err != nil {
		return err
	}
	v := t.releaseVersion()
	if v == "" {
		return fmt.Errorf("no module requires another")
	}
	work, err := os.MkdirTemp("", "outboxrelay-tidy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	p := &proxy{Dir: filepath.Join(work, "proxy")}
	r, err := newRunner(p.Dir, filepath.Join(work, "modcache"), nil)
	if err != nil {
		return err
	}
	for _, m := range t.Mods {
		if err := tidyModule(r, t.abs(m)); err != nil {
			return fmt.Errorf("%s: %w", m.Dir, err)
		}
		if _, err := p.publish(repo, "", m, v, time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(out, "tidy %s\n", m.Dir)
	}
	return nil
}

// tidyModule runs go mod tidy in dir with the repository's modules'
// lines out of its go.sum (the work tree's zips have other hashes than
// a release's), then puts back the lines it had: those of the last
// release, or none before the first.
func tidyModule(r *runner, dir string) error {
	sumFile := filepath.Join(dir, "go.sum")
	old, err := os.ReadFile(sumFile)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	if old != nil {
		if err := os.WriteFile(sumFile, withoutOurSums(old), 0o644); err != nil {
			return err
		}
	}
	if _, err := r.goCmd(dir, "mod", "tidy"); err != nil {
		if old != nil {
			_ = os.WriteFile(sumFile, old, 0o644)
		}
		return err
	}
	sum, err := os.ReadFile(sumFile)
	if os.IsNotExist(err) && len(ourSums(old)) == 0 {
		return nil
	}
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	merged := mergeSums(withoutOurSums(sum), ourSums(old))
	if len(merged) == 0 {
		return os.Remove(sumFile)
	}
	return os.WriteFile(sumFile, merged, 0o644)
}
