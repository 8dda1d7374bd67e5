package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// rewrite sets every requirement of one of the repository's modules,
// and every version go.work replaces them at, to the release's version,
// and commits that in the scratch repository: the release's first step.
func (s *sim) rewrite() error {
	for _, m := range s.t.Mods {
		var args []string
		for _, r := range m.File.Require {
			if ours(r.Mod.Path) && r.Mod.Version != s.v {
				args = append(args, "-require="+r.Mod.Path+"@"+s.v)
			}
		}
		if len(args) == 0 {
			continue
		}
		if _, err := s.r.goCmd(s.t.abs(m), append([]string{"mod", "edit"}, args...)...); err != nil {
			return err
		}
	}
	work := filepath.Join(s.scratch, "go.work")
	data, err := os.ReadFile(work)
	if err != nil {
		return err
	}
	data = workReplaceRE.ReplaceAll(data, []byte("${1} "+s.v+" =>"))
	if err := os.WriteFile(work, data, 0o644); err != nil {
		return err
	}
	if err := s.commit("release " + s.v + ": the modules require each other at " + s.v); err != nil {
		return err
	}
	return s.load()
}

// workReplaceRE matches the start of a versioned replace of one of the
// repository's modules in go.work.
var workReplaceRE = regexp.MustCompile(`(?m)^(\s*(?:replace\s+)?` + regexp.QuoteMeta(repoPath) + `(?:/\S*)?) v\S+ =>`)

// commit commits every change of the scratch repository, if any.
func (s *sim) commit(msg string) error {
	st, err := s.r.scratchGit(s.scratch, "status", "--porcelain")
	if err != nil || st == "" {
		return err
	}
	if _, err := s.r.scratchGit(s.scratch, "add", "-A"); err != nil {
		return err
	}
	_, err = s.r.scratchGit(s.scratch, "commit", "-q", "-m", msg)
	return err
}

// prepare brings module m's go.sum up to date and publishes m: its
// go.sum loses the lines of the repository's modules, go mod tidy
// (against the proxy, where every module m requires is by now) adds
// those of the release's zips, and must change nothing else; then m,
// committed so, goes into the proxy.
func (s *sim) prepare(m *repoModule) {
	if err := s.tidy(m); err != nil {
		s.fail(m, "go mod tidy", err)
	}
	if err := s.commit("go.sum of " + m.Path + " for " + s.v); err != nil {
		s.fail(m, "commit", err)
		return
	}
	if _, err := s.proxy.publish(s.scratch, "HEAD", m, s.v, s.when); err != nil {
		s.fail(m, "publish", err)
		return
	}
	fmt.Fprintf(s.out, "published %s %s (%s)\n", m.Path, s.v, m.Kind)
}

// tidy runs go mod tidy in m's directory, as the check that the
// committed go.mod and go.sum are tidy (when GOWORK=off, against the
// release) and to add the hashes of the repository's modules to go.sum.
// On failure the committed go.mod and go.sum stay.
func (s *sim) tidy(m *repoModule) error {
	dir := s.t.abs(m)
	modFile, sumFile := filepath.Join(dir, "go.mod"), filepath.Join(dir, "go.sum")
	oldMod, err := os.ReadFile(modFile)
	if err != nil {
		return err
	}
	oldSum, err := os.ReadFile(sumFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	restore := func() {
		_ = os.WriteFile(modFile, oldMod, 0o644)
		if oldSum != nil {
			_ = os.WriteFile(sumFile, oldSum, 0o644)
		} else {
			_ = os.Remove(sumFile)
		}
	}
	if oldSum != nil {
		if err := os.WriteFile(sumFile, withoutOurSums(oldSum), 0o644); err != nil {
			return err
		}
	}
	if _, err := s.r.goCmd(dir, "mod", "tidy"); err != nil {
		restore()
		return err
	}
	newMod, _ := os.ReadFile(modFile)
	newSum, _ := os.ReadFile(sumFile)
	var msgs []string
	if d := lineDiff(oldMod, newMod); d != "" {
		msgs = append(msgs, "it changes go.mod:\n"+d)
	}
	if d := lineDiff(withoutOurSums(oldSum), withoutOurSums(newSum)); d != "" {
		msgs = append(msgs, "it changes go.sum:\n"+d)
	}
	if len(msgs) > 0 {
		restore()
		return fmt.Errorf("the module is not tidy (run go mod tidy in %s, with the workspace's modules published): %s", m.Dir, strings.Join(msgs, "\n"))
	}
	return nil
}

// lineDiff lists the lines only a has (-) and only b has (+), at most
// 20; "" when both hold the same lines.
func lineDiff(a, b []byte) string {
	count := map[string]int{}
	for _, l := range bytes.Split(a, []byte("\n")) {
		count[string(l)]++
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		count[string(l)]--
	}
	var out []string
	for l, n := range count {
		switch {
		case n > 0:
			out = append(out, "\t- "+l)
		case n < 0:
			out = append(out, "\t+ "+l)
		}
	}
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], "\t…")
	}
	return strings.Join(out, "\n")
}
