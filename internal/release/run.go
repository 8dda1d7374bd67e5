package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// runner runs the go command and git as a user outside the repository
// would: no workspace, modules from the local proxy first, and a module
// cache of its own, so that nothing from an earlier run (or from
// anywhere but the proxy) stands in for the release's modules.
type runner struct {
	// env is added to the environment of every command.
	env []string
	// log receives each command and, when it fails, its output.
	log *os.File
}

// newRunner makes a runner whose go commands read modules from the file
// proxy at proxyDir, then from the machine's module cache (as a proxy:
// offline and fast), then from the machine's GOPROXY, into the module
// cache modCache.
func newRunner(proxyDir, modCache string, log *os.File) (*runner, error) {
	hostEnv := map[string]string{}
	out, err := exec.Command("go", "env", "GOMODCACHE", "GOPROXY", "GOFLAGS").Output()
	if err != nil {
		return nil, fmt.Errorf("go env: %w", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	for i, k := range []string{"GOMODCACHE", "GOPROXY", "GOFLAGS"} {
		if i < len(lines) {
			hostEnv[k] = lines[i]
		}
	}
	proxies := []string{fileURL(proxyDir)}
	if hostEnv["GOMODCACHE"] != "" {
		proxies = append(proxies, fileURL(filepath.Join(hostEnv["GOMODCACHE"], "cache", "download")))
	}
	// The machine's proxies for the other modules, without "direct"
	// and "off": a module of ours that the local proxy lacks must fail
	// there, not be looked for on GitHub.
	for _, p := range strings.FieldsFunc(hostEnv["GOPROXY"], func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" && p != "off" {
			proxies = append(proxies, p)
		}
	}
	return &runner{log: log, env: []string{
		"GOWORK=off",
		"GOPROXY=" + strings.Join(proxies, ","),
		// The release's modules are not in the checksum database
		// until they are published; the others are checked as usual.
		"GONOSUMDB=" + repoPath,
		"GOPRIVATE=", "GONOPROXY=",
		"GOMODCACHE=" + modCache,
		"GOFLAGS=" + strings.TrimSpace(hostEnv["GOFLAGS"]+" -mod=mod -modcacherw"),
		"GOTOOLCHAIN=local",
	}}, nil
}

func fileURL(dir string) string { return "file://" + filepath.ToSlash(dir) }

// run runs name with args in dir and returns its combined output; the
// error carries the output's last lines.
func (r *runner) run(dir string, extraEnv []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), r.env...), extraEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if r.log != nil {
		fmt.Fprintf(r.log, "$ (cd %s && %s %s)\n", dir, name, strings.Join(args, " "))
	}
	err := cmd.Run()
	if err != nil {
		if r.log != nil {
			r.log.Write(out.Bytes())
		}
		return out.String(), fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, tail(out.String(), 12))
	}
	return out.String(), nil
}

// goCmd runs the go command in dir.
func (r *runner) goCmd(dir string, args ...string) (string, error) {
	return r.run(dir, nil, "go", args...)
}

// git runs git in dir.
func (r *runner) git(dir string, args ...string) (string, error) {
	return r.run(dir, nil, "git", args...)
}

// scratchGit runs git in a scratch repository, as a committer of its
// own (it has no configuration, and signs nothing).
func (r *runner) scratchGit(dir string, args ...string) (string, error) {
	return r.run(dir, []string{
		"GIT_AUTHOR_NAME=release", "GIT_AUTHOR_EMAIL=release@localhost",
		"GIT_COMMITTER_NAME=release", "GIT_COMMITTER_EMAIL=release@localhost",
	}, "git", append([]string{"-c", "core.autocrlf=input", "-c", "commit.gpgsign=false"}, args...)...)
}

// tail is the last n lines of s, indented.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"\t…"}, lines[len(lines)-n:]...)
	}
	return "\t" + strings.Join(lines, "\n\t")
}
