package secretfmt

import "strings"

// URLParts is a URL cut into the parts that may and may not be shown
// (see SplitURL); together, in order, they are the URL.
type URLParts struct {
	// Scheme is the scheme with its "://", or "" when there is none.
	Scheme string
	// User is the user information with its '@', or "".
	User string
	// HostPath is the host and the path.
	HostPath string
	// Tail is the query and the fragment, from the first '?' or '#', or
	// "".
	Tail string
}

// SplitURL cuts raw into its parts by the text alone, not by a parse, so
// that a URL that does not parse (a password with an unencoded '/' or
// '#', say) is cut too. The user information ends at the last '@' before
// the query, even when the password holds a '/'. A sink that shows a URL
// in an error or a printout keeps the parts that hold no credential.
func SplitURL(raw string) URLParts {
	var p URLParts
	rest := raw
	if i := strings.Index(raw, "://"); i >= 0 {
		p.Scheme, rest = raw[:i+3], raw[i+3:]
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		rest, p.Tail = rest[:i], rest[i:]
	}
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		p.User, rest = rest[:i+1], rest[i+1:]
	}
	p.HostPath = rest
	return p
}
