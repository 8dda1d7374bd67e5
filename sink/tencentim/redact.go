package tencentim

import (
	"bytes"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/internal/safetext"
	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// Text from outside (Tencent's ErrorInfo, a proxy's answer, a transport
// error) passes through scrub before it reaches an Error. scrub cuts out
// every run of leakRun characters of a secret (the key, a UserSig, the
// HMAC inside a UserSig), in whatever form the text holds it: raw,
// percent-encoded in either hex case up to maxDecodeLevels deep,
// query-escaped, or in the standard base64 alphabet instead of
// TLSSigAPIv2's ('+', '/', '=' for '*', '-', '_'). It also cuts the value
// of any usersig parameter (any case, after '=' or ':') and any query
// string ("?name=…"), known secret or not.
const (
	// leakRun is the length of a run of a secret that counts as leaking
	// it. A shorter secret counts only whole.
	leakRun = 16
	// maxScrubBytes bounds the text scrub looks at; errors keep at most
	// maxInfoBytes of what it returns.
	maxScrubBytes = 4 << 10
	// maxDecodeLevels is how many rounds of percent-decoding scrub sees
	// through.
	maxDecodeLevels = 3
	// maxScrubPasses bounds the passes scrub makes until its output is
	// stable; a text still changing after them is replaced whole.
	maxScrubPasses = 4
)

// scrub returns text, made valid UTF-8, with every part that holds a
// secret or a usersig or query value replaced by secretfmt.Mark, in at
// most maxScrubBytes. Each pass runs again over its own output, so a
// mark can never join its neighbours into a secret's run.
func scrub(text string, secrets []string) string {
	text = strings.ToValidUTF8(safetext.Truncate(text, maxScrubBytes), "\uFFFD")
	g := newGrams(secrets)
	for range maxScrubPasses {
		out := g.scrubOnce(text)
		if out == text {
			return safetext.Truncate(out, maxScrubBytes)
		}
		text = out
	}
	return secretfmt.Mark
}

// equiv folds the characters that one encoding of a secret swaps for
// another: query escaping writes ' ' as '+'; the standard base64 alphabet
// has '+', '/', '=' where TLSSigAPIv2 has '*', '-', '_'.
var equiv = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	t[' '], t['*'], t['/'], t['='] = '+', '+', '-', '_'
	return t
}()

// grams holds every run of leakRun bytes of each secret (the whole
// secret, if shorter), folded by equiv.
type grams struct {
	sizes []int
	set   map[string]struct{}
}

func newGrams(secrets []string) *grams {
	g := &grams{set: map[string]struct{}{}}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		folded := fold([]byte(s))
		w := min(leakRun, len(folded))
		if !slices.Contains(g.sizes, w) {
			g.sizes = append(g.sizes, w)
		}
		for i := 0; i+w <= len(folded); i++ {
			g.set[string(folded[i:i+w])] = struct{}{}
		}
	}
	return g
}

func fold(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = equiv[c]
	}
	return out
}

// view is a text decoded some number of times. from[i] is where b[i]
// came from in the original text: b[i] stands for the original bytes
// from[i] to from[i+1].
type view struct {
	b    []byte
	from []int
}

func newView(text string) view {
	v := view{b: []byte(text), from: make([]int, len(text)+1)}
	for i := range v.from {
		v.from[i] = i
	}
	return v
}

// decode percent-decodes v once (either hex case); false if v has
// nothing to decode.
func (v view) decode() (view, bool) {
	out := view{b: make([]byte, 0, len(v.b)), from: make([]int, 0, len(v.from))}
	changed := false
	for i := 0; i < len(v.b); i++ {
		out.from = append(out.from, v.from[i])
		if v.b[i] == '%' && i+2 < len(v.b) && isHex(v.b[i+1]) && isHex(v.b[i+2]) {
			out.b = append(out.b, unhex(v.b[i+1])<<4|unhex(v.b[i+2]))
			i += 2
			changed = true
			continue
		}
		out.b = append(out.b, v.b[i])
	}
	out.from = append(out.from, v.from[len(v.b)])
	return out, changed
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// scrubOnce marks what must go in every decoding of text, then replaces
// each marked stretch (widened to whole characters) by the mark.
func (g *grams) scrubOnce(text string) string {
	cover := make([]bool, len(text))
	v := newView(text)
	for level := 0; ; level++ {
		g.coverRuns(v, cover)
		coverUserSigValues(v, cover)
		coverQueries(v, cover)
		if level == maxDecodeLevels {
			break
		}
		next, changed := v.decode()
		if !changed {
			break
		}
		v = next
	}
	return replaceCovered(text, cover)
}

// coverRuns marks every window of v that is a run of a secret.
func (g *grams) coverRuns(v view, cover []bool) {
	if len(g.set) == 0 {
		return
	}
	folded := fold(v.b)
	for _, w := range g.sizes {
		for i := 0; i+w <= len(folded); i++ {
			if _, ok := g.set[string(folded[i:i+w])]; ok {
				mark(cover, v.from[i], v.from[i+w])
			}
		}
	}
}

// coverUserSigValues marks the value of every usersig parameter, in any
// case: usersig=V, "UserSig": "V", usersig: V.
func coverUserSigValues(v view, cover []bool) {
	name := []byte("usersig")
	b := v.b
	done := 0 // b[:done] is marked: scanning it again would make this quadratic
	for i := 0; i+len(name) <= len(b); i++ {
		if b[i]|0x20 != 'u' || !bytes.EqualFold(b[i:i+len(name)], name) {
			continue
		}
		k := skipQuote(b, i+len(name))
		k = skipSpaces(b, k)
		if k >= len(b) || (b[k] != '=' && b[k] != ':') {
			continue
		}
		k = max(done, skipQuote(b, skipSpaces(b, k+1)))
		end := k
		for end < len(b) && isSigByte(b[end]) {
			end++
		}
		mark(cover, v.from[k], v.from[end])
		done = end
	}
}

// coverQueries marks every query string: what follows "?name=" up to a
// space, quote or angle bracket.
func coverQueries(v view, cover []bool) {
	b := v.b
	done := 0 // b[:done] is marked
	for i := 0; i < len(b); i++ {
		if b[i] != '?' {
			continue
		}
		k := i + 1
		for k < len(b) && (isAlnum(b[k]) || b[k] == '_' || b[k] == '.' || b[k] == '-') {
			k++
		}
		if k == i+1 || k >= len(b) || b[k] != '=' {
			continue
		}
		end := max(done, k)
		for end < len(b) && strings.IndexByte(" \t\r\n\"'<>`", b[end]) < 0 {
			end++
		}
		mark(cover, v.from[i+1], v.from[end])
		done = end
	}
}

func skipQuote(b []byte, k int) int {
	if k < len(b) && (b[k] == '"' || b[k] == '\'') {
		return k + 1
	}
	return k
}

func skipSpaces(b []byte, k int) int {
	for k < len(b) && (b[k] == ' ' || b[k] == '\t') {
		k++
	}
	return k
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isSigByte: the characters of a UserSig in either base64 alphabet, and
// of its percent-encoding.
func isSigByte(c byte) bool { return isAlnum(c) || strings.IndexByte("*-_+/=%.~", c) >= 0 }

func mark(cover []bool, from, to int) {
	for i := from; i < to; i++ {
		cover[i] = true
	}
}

// replaceCovered replaces each covered stretch of text, widened to whole
// UTF-8 characters, by one mark.
func replaceCovered(text string, cover []bool) string {
	found := false
	for i := 0; i < len(text); {
		_, n := utf8.DecodeRuneInString(text[i:])
		for j := i; j < i+n; j++ {
			if cover[j] {
				mark(cover, i, i+n)
				found = true
				break
			}
		}
		i += n
	}
	if !found {
		return text
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		j := i
		for j < len(text) && cover[j] == cover[i] {
			j++
		}
		if cover[i] {
			b.WriteString(secretfmt.Mark)
		} else {
			b.WriteString(text[i:j])
		}
		i = j
	}
	return b.String()
}
