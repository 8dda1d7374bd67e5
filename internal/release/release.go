package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// releaseOptions says what to release.
type releaseOptions struct {
	Repo    string
	Version string
	DryRun  bool
	Keep    bool
	Out     io.Writer
}

// runRelease releases the repository's HEAD at o.Version: the
// simulation with every requirement rewritten, then the same go.mod,
// go.sum and go.work files committed in the repository, and the tags.
func runRelease(o releaseOptions) error {
	v := o.Version
	if !semver.IsValid(v) || semver.Canonical(v) != v || semver.Build(v) != "" {
		return fmt.Errorf("-version %q: want a semantic version such as v0.2.0", v)
	}
	repo, err := gitOutput(o.Repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	if st, err := gitOutput(repo, "status", "--porcelain"); err != nil || st != "" {
		return fmt.Errorf("the work tree is not clean (git status --porcelain):\n%s%v", st, errOrNil(err))
	}
	s, err := newSim(simOptions{Repo: repo, Rev: "HEAD", Version: v, Rewrite: true, Out: o.Out})
	if s != nil {
		defer s.close(o.Keep)
	}
	if err != nil {
		return err
	}
	var tags []string
	for _, m := range s.t.Mods {
		tag := m.Tag(v)
		if _, err := gitOutput(repo, "rev-parse", "-q", "--verify", "refs/tags/"+tag); err == nil {
			return fmt.Errorf("tag %s exists already", tag)
		}
		tags = append(tags, tag)
	}
	fmt.Fprintf(o.Out, "releasing HEAD at %s: %d modules\n", v, len(s.t.Mods))
	if err := s.run(); err != nil {
		return err
	}
	changed, err := s.changedFiles()
	if err != nil {
		return err
	}
	if o.DryRun {
		fmt.Fprintf(o.Out, "dry run: would commit %s and tag %s\n", strings.Join(changed, " "), strings.Join(tags, " "))
		return nil
	}
	if err := s.commitIn(repo, changed); err != nil {
		return err
	}
	if err := s.verifyZips(repo); err != nil {
		return fmt.Errorf("%w (the release commit is made, no tag is: look at it, then git reset --hard HEAD~1)", err)
	}
	for _, m := range s.t.Mods {
		if _, err := gitOutput(repo, "tag", "-a", m.Tag(v), "-m", m.Path+" "+v); err != nil {
			return err
		}
	}
	fmt.Fprintf(o.Out, "tagged %s\npublish with: git push origin HEAD %s\n", strings.Join(tags, " "), strings.Join(tags, " "))
	return nil
}

func errOrNil(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// changedFiles lists the files the release changed in the scratch
// repository since the tree it started from.
func (s *sim) changedFiles() ([]string, error) {
	root, err := s.r.scratchGit(s.scratch, "rev-list", "--max-parents=0", "HEAD")
	if err != nil {
		return nil, err
	}
	out, err := s.r.scratchGit(s.scratch, "diff", "--name-only", strings.TrimSpace(root), "HEAD")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// commitIn copies the changed files into the real repository and
// commits them.
func (s *sim) commitIn(repo string, files []string) error {
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(s.scratch, filepath.FromSlash(f)))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(repo, filepath.FromSlash(f)), data, 0o644); err != nil {
			return err
		}
	}
	if _, err := gitOutput(repo, append([]string{"add", "--"}, files...)...); err != nil {
		return err
	}
	msg := "Release " + s.v + ": every module requires the others at " + s.v + ", and go.sum holds their hashes\n\n" +
		"Made by go run ./internal/release -version " + s.v + ", which built every library module from outside the repository first."
	_, err := gitOutput(repo, "commit", "-q", "-m", msg)
	return err
}

// verifyZips checks that each module's zip from the repository's HEAD,
// as the go command will make it from the tag, is the zip the run
// published and tested.
func (s *sim) verifyZips(repo string) error {
	tmp, err := os.MkdirTemp("", "release-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, m := range s.t.Mods {
		subdir := strings.TrimPrefix(m.Dir, ".")
		var z bytes.Buffer
		if err := zip.CreateFromVCS(&z, module.Version{Path: m.Path, Version: s.v}, repo, "HEAD", subdir); err != nil {
			return err
		}
		f := filepath.Join(tmp, "m.zip")
		if err := os.WriteFile(f, z.Bytes(), 0o644); err != nil {
			return err
		}
		h, err := dirhash.HashZip(f, dirhash.Hash1)
		if err != nil {
			return err
		}
		if h != s.proxy.hashes[m.Path] {
			return fmt.Errorf("%s: the zip of the release commit has hash %s, the one tested %s", m.Path, h, s.proxy.hashes[m.Path])
		}
	}
	return nil
}

// gitOutput runs git in dir and returns its trimmed output.
func gitOutput(dir string, args ...string) (string, error) {
	r := &runner{}
	out, err := r.git(dir, args...)
	return strings.TrimSpace(out), err
}
