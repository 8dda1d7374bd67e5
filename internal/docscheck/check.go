package main

import (
	"os"
	"path/filepath"
	"sync"
)

// checker checks documents of the repository at root.
type checker struct {
	root string
	// outboxctl learns outboxctl's commands and flags; called at most
	// once, when a document first runs outboxctl.
	outboxctl func(root string) (*cliSpec, error)

	specOnce sync.Once
	spec     *cliSpec
	specErr  error
	docs     map[string]*doc
}

// parse reads and parses the Markdown file rel (relative to the root),
// once.
func (c *checker) parse(rel string) (*doc, error) {
	if d, ok := c.docs[rel]; ok {
		return d, nil
	}
	b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(rel)))
	if err != nil {
		return nil, err
	}
	d := parseMarkdown(string(b))
	if c.docs == nil {
		c.docs = map[string]*doc{}
	}
	c.docs[rel] = d
	return d, nil
}

// checkFile checks the links of file (relative to the root) and, with
// commands, the commands of its fenced shell blocks.
func (c *checker) checkFile(file string, commands bool) ([]finding, error) {
	d, err := c.parse(file)
	if err != nil {
		return nil, err
	}
	var out []finding
	for _, l := range d.links() {
		for _, msg := range c.checkLink(file, d, l) {
			out = append(out, finding{file, l.line, msg})
		}
	}
	if !commands {
		return out, nil
	}
	fs, err := c.checkInstallVersions(file, d)
	if err != nil {
		return nil, err
	}
	out = append(out, fs...)
	out = append(out, checkCoverage(file, d)...)
	for _, b := range d.blocks {
		if !shellLangs[b.lang] {
			continue
		}
		fs, err := c.checkBlock(file, b)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// cli returns outboxctl's commands and flags.
func (c *checker) cli() (*cliSpec, error) {
	c.specOnce.Do(func() { c.spec, c.specErr = c.outboxctl(c.root) })
	return c.spec, c.specErr
}
