package main

import (
	stdzip "archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// proxy is a module proxy on the file system (GOPROXY=file://DIR): for
// each module, DIR/<escaped path>/@v/ holds list, and VERSION.info,
// .mod and .zip.
type proxy struct {
	Dir string
	// hashes are the h1: hashes of the zips published, by module path.
	hashes map[string]string
}

// publish adds module m at version v to the proxy, its zip made from
// the git repository repo at rev (the files a git archive of the
// module's directory holds, plus the repository's LICENSE for a module
// without one: what the go command, and so proxy.golang.org, serves for
// the tag), or with rev "" from the files in its directory. It returns
// the zip's h1: hash.
func (p *proxy) publish(repo, rev string, m *repoModule, v string, when time.Time) (string, error) {
	esc, err := module.EscapePath(m.Path)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(p.Dir, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	subdir := m.Dir
	if subdir == "." {
		subdir = ""
	}
	var z bytes.Buffer
	mv := module.Version{Path: m.Path, Version: v}
	if rev == "" { // the files on disk, as they are
		err = zip.CreateFromDir(&z, mv, filepath.Join(repo, filepath.FromSlash(m.Dir)))
	} else {
		err = zip.CreateFromVCS(&z, mv, repo, rev, subdir)
	}
	if err != nil {
		return "", fmt.Errorf("zip %s: %w", mv, err)
	}
	zipFile := filepath.Join(dir, v+".zip")
	if err := os.WriteFile(zipFile, z.Bytes(), 0o644); err != nil {
		return "", err
	}
	modData, err := zipGoMod(zipFile, mv)
	if err != nil {
		return "", err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{v, when.UTC()})
	for name, data := range map[string][]byte{v + ".mod": modData, v + ".info": info} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", err
		}
	}
	if err := addToList(filepath.Join(dir, "list"), v); err != nil {
		return "", err
	}
	h, err := dirhash.HashZip(zipFile, dirhash.Hash1)
	if err != nil {
		return "", err
	}
	if p.hashes == nil {
		p.hashes = map[string]string{}
	}
	p.hashes[m.Path] = h
	return h, nil
}

// zipGoMod is the go.mod inside a module zip: the .mod file the proxy
// serves must be the zip's own.
func zipGoMod(zipFile string, mv module.Version) ([]byte, error) {
	zr, err := stdzip.OpenReader(zipFile)
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	f, err := zr.Open(mv.Path + "@" + mv.Version + "/go.mod")
	if err != nil {
		return nil, fmt.Errorf("%s: no go.mod in its zip: %w", mv, err)
	}
	defer f.Close()
	return io.ReadAll(f)
}

// addToList adds v to a proxy's list file, once.
func addToList(list, v string) error {
	old, err := os.ReadFile(list)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, l := range strings.Fields(string(old)) {
		if l == v {
			return nil
		}
	}
	return os.WriteFile(list, append(old, []byte(v+"\n")...), 0o644)
}
