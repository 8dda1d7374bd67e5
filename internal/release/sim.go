package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
)

// sim is one run of the release, in a scratch repository made from a
// commit of the real one: every module published to a local file-system
// proxy, then used from outside as a user would.
type sim struct {
	r       *runner
	out     io.Writer
	work    string // the run's temporary directory
	scratch string // the scratch repository
	t       *tree
	v       string // the release's version
	proxy   *proxy
	fails   []string
	when    time.Time
}

// simOptions says what to simulate.
type simOptions struct {
	Repo    string // the real repository
	Rev     string // its commit to release
	Version string // "": the version the go.mod files require of each other
	// Rewrite sets every requirement of one of the repository's modules
	// to Version first, as the release does.
	Rewrite bool
	Out     io.Writer
	Keep    bool // keep the temporary directory, for a look afterwards
}

// newSim makes the scratch repository of o.Rev and reads its modules.
func newSim(o simOptions) (*sim, error) {
	work, err := os.MkdirTemp("", "outboxrelay-release-")
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(work, "commands.log"))
	if err != nil {
		return nil, err
	}
	s := &sim{out: o.Out, work: work, scratch: filepath.Join(work, "repo"), when: time.Now()}
	s.proxy = &proxy{Dir: filepath.Join(work, "proxy")}
	if s.r, err = newRunner(s.proxy.Dir, filepath.Join(work, "modcache"), log); err != nil {
		return s, err
	}
	if err := s.checkout(o.Repo, o.Rev); err != nil {
		return s, err
	}
	if err := s.load(); err != nil {
		return s, err
	}
	s.v = o.Version
	if s.v == "" {
		s.v = s.t.releaseVersion()
	}
	if s.v == "" {
		return s, fmt.Errorf("no module requires another: give -version")
	}
	if o.Rewrite {
		if err := s.rewrite(); err != nil {
			return s, err
		}
	}
	return s, nil
}

// close removes the run's temporary directory (its module cache is
// writable: -modcacherw).
func (s *sim) close(keep bool) {
	if s.r != nil && s.r.log != nil {
		s.r.log.Close()
	}
	if keep {
		fmt.Fprintf(s.out, "kept %s (commands.log: every command run)\n", s.work)
		return
	}
	_ = os.RemoveAll(s.work)
}

// checkout writes the tree of rev (git archive: the committed files,
// never the work tree) into a scratch repository with one commit.
func (s *sim) checkout(repo, rev string) error {
	cmd := exec.Command("git", "archive", "--format=tar", rev)
	cmd.Dir = repo
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	archive, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git archive %s: %v: %s", rev, err, stderr.String())
	}
	if err := untar(bytes.NewReader(archive), s.scratch); err != nil {
		return err
	}
	if _, err := s.r.scratchGit(s.scratch, "init", "-q"); err != nil {
		return err
	}
	if _, err := s.r.scratchGit(s.scratch, "add", "-A"); err != nil {
		return err
	}
	_, err = s.r.scratchGit(s.scratch, "commit", "-q", "-m", "the tree of "+rev)
	return err
}

// untar extracts a tar archive into dir.
func untar(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("archive entry %q is outside the tree", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr, os.FileMode(h.Mode)&0o777)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(p string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// load reads the scratch repository's modules.
func (s *sim) load() error {
	files, err := s.r.git(s.scratch, "ls-files")
	if err != nil {
		return err
	}
	s.t, err = loadTree(s.scratch, strings.Fields(files))
	return err
}

// fail records a failure of module m's step.
func (s *sim) fail(m *repoModule, step string, err error) {
	line := fmt.Sprintf("FAIL %s: %s: %v", m.Path, step, err)
	s.fails = append(s.fails, line)
	fmt.Fprintln(s.out, line)
}

// checkRules checks what no go command would refuse inside the
// repository but a user's build would: every requirement of one of the
// repository's modules names the release's version and a module of the
// tree; no published module requires a tool or test module; no go.mod
// replaces one of the repository's modules; go.work uses every module
// and puts it in place of the release's version.
func (s *sim) checkRules() {
	for _, m := range s.t.Mods {
		for _, r := range m.File.Require {
			if !ours(r.Mod.Path) {
				continue
			}
			dep := s.t.module(r.Mod.Path)
			switch {
			case dep == nil:
				s.fail(m, "go.mod", fmt.Errorf("requires %s %s, which is no module of this tree: it is never published", r.Mod.Path, r.Mod.Version))
			case r.Mod.Version != s.v:
				s.fail(m, "go.mod", fmt.Errorf("requires %s %s; the release is %s, and only that version is published", r.Mod.Path, r.Mod.Version, s.v))
			case dep.Kind == tool && m.Kind != tool:
				s.fail(m, "go.mod", fmt.Errorf("requires %s, a %s module (%s): a published %s must not", dep.Path, dep.Kind, toolWhy(dep), m.Kind))
			}
		}
		var replaced []string
		for _, r := range m.File.Replace {
			if ours(r.Old.Path) {
				replaced = append(replaced, r.Old.Path+" => "+r.New.Path)
			}
		}
		if len(replaced) > 0 {
			s.fail(m, "go.mod", fmt.Errorf("replaces %s: users' builds ignore that and go install refuses it; go.work serves development", strings.Join(replaced, ", ")))
		}
	}
	s.checkWork()
}

func toolWhy(m *repoModule) string {
	if why := tools[m.Dir]; why != "" {
		return why
	}
	return "under internal/"
}

// checkWork checks go.work: it uses every module, and replaces each at
// the release's version with its directory (the module graph reads the
// go.mod of every required version, which no proxy serves before the
// tag).
func (s *sim) checkWork() {
	root := s.t.module(repoPath)
	data, err := os.ReadFile(filepath.Join(s.scratch, "go.work"))
	if err != nil {
		s.fail(root, "go.work", err)
		return
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		s.fail(root, "go.work", err)
		return
	}
	used, replaced := map[string]bool{}, map[string]string{}
	for _, u := range wf.Use {
		used[filepath.ToSlash(filepath.Clean(u.Path))] = true
	}
	for _, r := range wf.Replace {
		if ours(r.Old.Path) {
			replaced[r.Old.Path+" "+r.Old.Version] = filepath.ToSlash(filepath.Clean(r.New.Path))
		}
	}
	var unused, missing []string
	for _, m := range s.t.Mods {
		if !used[m.Dir] {
			unused = append(unused, m.Dir)
		}
		if dir, ok := replaced[m.Path+" "+s.v]; !ok || dir != m.Dir {
			missing = append(missing, m.Path+" "+s.v+" => "+m.Dir)
		}
	}
	if len(unused) > 0 {
		s.fail(root, "go.work", fmt.Errorf("does not use %s", strings.Join(unused, ", ")))
	}
	if len(missing) > 0 {
		s.fail(root, "go.work", fmt.Errorf("lacks replace %s", strings.Join(missing, ", ")))
	}
}
