package main

import (
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	// linkRE finds inline links and images: [text](target "title").
	// Link texts may span lines; code spans are blanked out before.
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// refDefRE finds reference definitions: [label]: target.
	refDefRE = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	// htmlLinkRE finds href and src attributes of HTML tags.
	htmlLinkRE = regexp.MustCompile(`(?i)\b(?:href|src)="([^"]*)"`)
	// schemeRE tells an absolute URL (https:, mailto:) from a path.
	schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// lineAnchorRE is GitHub's anchor of a line or lines of a file.
	lineAnchorRE = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

// link is a link target in a document.
type link struct {
	target string
	line   int
}

// links returns the link targets of d's prose.
func (d *doc) links() []link {
	var out []link
	for _, re := range []*regexp.Regexp{linkRE, refDefRE, htmlLinkRE} {
		for _, m := range re.FindAllStringSubmatchIndex(d.prose, -1) {
			target := strings.TrimSuffix(strings.TrimPrefix(d.prose[m[2]:m[3]], "<"), ">")
			out = append(out, link{target: target, line: 1 + strings.Count(d.prose[:m[0]], "\n")})
		}
	}
	return out
}

// checkLink checks one link of file (relative to the root): a relative
// target must exist inside the repository, and a fragment must name an
// anchor of a Markdown target (or a line of another file).
func (c *checker) checkLink(file string, self *doc, l link) []string {
	target := l.target
	if target == "" {
		return []string{"empty link"}
	}
	if schemeRE.MatchString(target) || strings.HasPrefix(target, "//") {
		return nil // an absolute URL: no network here
	}
	p, frag, _ := strings.Cut(target, "#")
	p, _, _ = strings.Cut(p, "?")
	unescaped, err := url.PathUnescape(p)
	if err != nil {
		return []string{"link " + quote(target) + ": " + err.Error()}
	}
	p = unescaped
	if p == "" { // a fragment of this file
		if !self.anchors[frag] {
			return []string{"link " + quote(target) + ": no heading or anchor " + quote(frag) + " in this file"}
		}
		return nil
	}
	var rel string
	if strings.HasPrefix(p, "/") {
		rel = path.Clean(strings.TrimPrefix(p, "/"))
	} else {
		rel = path.Clean(path.Join(path.Dir(file), p))
	}
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return []string{"link " + quote(target) + ": leaves the repository"}
	}
	st, err := os.Stat(filepath.Join(c.root, filepath.FromSlash(rel)))
	if err != nil {
		return []string{"link " + quote(target) + ": " + rel + " does not exist"}
	}
	if frag == "" {
		return nil
	}
	if st.IsDir() || !strings.HasSuffix(strings.ToLower(rel), ".md") {
		if !st.IsDir() && lineAnchorRE.MatchString(frag) {
			return nil
		}
		return []string{"link " + quote(target) + ": " + rel + " is not a Markdown file, so it has no anchor " + quote(frag)}
	}
	td, err := c.parse(rel)
	if err != nil {
		return []string{"link " + quote(target) + ": " + err.Error()}
	}
	if !td.anchors[frag] {
		return []string{"link " + quote(target) + ": no heading or anchor " + quote(frag) + " in " + rel}
	}
	return nil
}

func quote(s string) string { return "\"" + s + "\"" }
