package main

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// doc is a Markdown file split into what the checks need.
type doc struct {
	// text is the whole file.
	text string
	// prose is the file with fenced code blocks and inline code spans
	// blanked out (newlines kept, so offsets still give line numbers).
	prose string
	// blocks are the fenced code blocks.
	blocks []block
	// anchors are the fragment IDs the file's headings and explicit
	// anchors give, as GitHub renders them.
	anchors map[string]bool
}

// block is a fenced code block.
type block struct {
	lang  string
	line  int      // line number of the block's first content line
	lines []string // its content
}

var (
	fenceRE    = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})\\s*([^`\\s]*)")
	headingRE  = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	setextRE   = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	explicitRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// parseMarkdown splits text into prose, fenced blocks and anchors.
func parseMarkdown(text string) *doc {
	d := &doc{text: text, anchors: map[string]bool{}}
	lines := strings.Split(text, "\n")
	prose := make([]string, len(lines))
	var fence string // the open fence's marker, or ""
	var cur *block
	var headings []string
	prev := "" // the previous prose line, for setext headings
	for i, line := range lines {
		if fence != "" {
			trimmed := strings.TrimSpace(line)
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
				d.blocks = append(d.blocks, *cur)
				cur = nil
			} else {
				cur.lines = append(cur.lines, line)
			}
			continue
		}
		if m := fenceRE.FindStringSubmatch(line); m != nil {
			fence = m[1]
			cur = &block{lang: strings.ToLower(m[2]), line: i + 2}
			prev = ""
			continue
		}
		prose[i] = line
		if m := headingRE.FindStringSubmatch(line); m != nil {
			headings = append(headings, m[2])
		} else if setextRE.MatchString(line) && strings.TrimSpace(prev) != "" && !isListItem(prev) && !headingRE.MatchString(prev) {
			headings = append(headings, strings.TrimSpace(prev))
		}
		for _, m := range explicitRE.FindAllStringSubmatch(line, -1) {
			d.anchors[m[1]] = true
		}
		prev = line
	}
	if cur != nil { // an unclosed fence runs to the end
		d.blocks = append(d.blocks, *cur)
	}
	seen := map[string]int{}
	for _, h := range headings {
		s := slug(h)
		if n, ok := seen[s]; ok {
			seen[s] = n + 1
			s = s + "-" + strconv.Itoa(n+1)
		} else {
			seen[s] = 0
		}
		d.anchors[s] = true
	}
	d.prose = blankCodeSpans(strings.Join(prose, "\n"))
	return d
}

func isListItem(line string) bool {
	t := strings.TrimLeft(line, " ")
	return strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") || strings.HasPrefix(t, "+ ")
}

// blankCodeSpans replaces each inline code span (backticks included)
// with spaces, keeping newlines.
func blankCodeSpans(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := runLen(b, i, '`')
		closing := findRun(b, i+n, n)
		if closing < 0 { // no closing run: literal backticks
			i += n
			continue
		}
		for j := i; j < closing+n; j++ {
			if b[j] != '\n' {
				b[j] = ' '
			}
		}
		i = closing + n
	}
	return string(b)
}

// runLen is the length of the run of c at b[i:].
func runLen(b []byte, i int, c byte) int {
	n := 0
	for i+n < len(b) && b[i+n] == c {
		n++
	}
	return n
}

// findRun is the index of the next run of exactly n backticks at or
// after i, not crossing a blank line, or -1.
func findRun(b []byte, i, n int) int {
	for i < len(b) {
		if b[i] == '\n' && i+1 < len(b) && b[i+1] == '\n' {
			return -1
		}
		if b[i] == '`' {
			m := runLen(b, i, '`')
			if m == n {
				return i
			}
			i += m
			continue
		}
		i++
	}
	return -1
}

var (
	inlineLinkRE = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	imageRE      = regexp.MustCompile(`!\[([^\]]*)\]\([^)]*\)`)
	tagRE        = regexp.MustCompile(`<[^>]+>`)
)

// slug is the fragment ID GitHub gives a heading: its text as rendered
// (links by their text, no markup), lower case, every character that is
// not a letter, a digit, a space, '-' or '_' removed, each space made a
// '-'.
func slug(heading string) string {
	s := imageRE.ReplaceAllString(heading, "$1")
	s = inlineLinkRE.ReplaceAllString(s, "$1")
	s = tagRE.ReplaceAllString(s, "")
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
