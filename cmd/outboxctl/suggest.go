package main

import (
	"slices"
	"strings"
)

// suggest returns the candidates nearest to got, a mistyped command,
// flag, verb or table name: those at the smallest edit distance when it
// is within maxTypos(got), else the one candidate got is a prefix of (3
// characters at least). None when nothing is that close: a suggestion
// far from what was typed misleads more than it helps.
func suggest(got string, candidates []string) []string {
	if got == "" {
		return nil
	}
	best, bestDist := []string(nil), maxTypos(got)
	for _, c := range candidates {
		switch d := editDistance(strings.ToLower(got), strings.ToLower(c)); {
		case d < bestDist || (d == bestDist && len(best) == 0):
			best, bestDist = []string{c}, d
		case d == bestDist && !slices.Contains(best, c):
			best = append(best, c)
		}
	}
	if len(best) > 0 {
		slices.Sort(best)
		return best
	}
	var prefixed []string
	for _, c := range candidates {
		if len(got) >= 3 && strings.HasPrefix(c, got) {
			prefixed = append(prefixed, c)
		}
	}
	if len(prefixed) == 1 {
		return prefixed
	}
	return nil
}

// maxTypos is how many edits away a suggestion for got may be: one for
// up to 5 characters ("stuts", "tabel"), then one more per 3 characters,
// at most 3.
func maxTypos(got string) int {
	return min(3, max(1, len([]rune(got))/3))
}

// editDistance is the optimal string alignment distance between a and
// b: insertions, deletions, substitutions and transpositions of two
// neighbours ("tabel" is one edit from "table") each count one.
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// d[i][j] is the distance between x[:i] and y[:j].
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}

// didYouMean renders suggest's answer for a message: "; did you mean
// --table?" or "; did you mean add or remove?", or "" when there is
// none. prefix goes before each name ("--" for flags).
func didYouMean(got, prefix string, candidates []string) string {
	s := suggest(got, candidates)
	if len(s) == 0 {
		return ""
	}
	for i := range s {
		s[i] = prefix + s[i]
	}
	if len(s) > 3 {
		s = s[:3]
	}
	last := len(s) - 1
	if last == 0 {
		return "; did you mean " + s[0] + "?"
	}
	return "; did you mean " + strings.Join(s[:last], ", ") + " or " + s[last] + "?"
}
