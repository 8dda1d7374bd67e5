package pgdsn

import "strings"

// The reasons checkURL gives. Each is fixed: none quotes the DSN.
const (
	reasonHash          = `it holds a "#"`
	reasonAts           = `its authority (from "//" to the first "/" or "?") holds more than one "@"`
	reasonAtAfterHost   = `it holds an "@" after the host, in the database name or the query`
	reasonColons        = `its user and password hold more than one ":"`
	reasonUserinfoChars = `its user or password holds a character that must be percent-encoded`
	reasonHosts         = `its host list is not HOST[:PORT] separated by "," (a host of letters, digits, "-._~" or [IPv6]; a port of digits)`
	reasonDatabase      = `its database name holds a character that must be percent-encoded`
	reasonPercent       = `it holds a "%" that is not followed by two hex digits, or %00`
	reasonQueryPair     = `its query is not KEY=VALUE pairs joined by "&", each with one "="`
	reasonQueryKey      = `a key of its query is not a name (letters, digits, "_" and ".")`
	reasonQueryValue    = `a value of its query holds a character that must be percent-encoded`
	reasonTwice         = `a key is given twice (in the query, or in the query and the URL)`
	reasonSecretBeside  = `with a password in the query, a key of it is not a connection keyword`
)

// checkURL checks a postgres:// or postgresql:// DSN.
func checkURL(dsn string) error {
	if reason := urlReason(dsn); reason != "" {
		return &Error{Reason: reason, How: URLHow}
	}
	return nil
}

// urlReason is the rule dsn breaks, or "".
func urlReason(dsn string) string {
	rest, ok := strings.CutPrefix(dsn, "postgresql://")
	if !ok {
		rest = strings.TrimPrefix(dsn, "postgres://")
	}
	if strings.Contains(rest, "#") {
		return reasonHash
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	switch {
	case strings.Count(authority, "@") > 1:
		return reasonAts
	case strings.Contains(tail, "@"):
		return reasonAtAfterHost
	}
	given := map[string]bool{}
	hosts := authority
	if userinfo, after, ok := strings.Cut(authority, "@"); ok {
		hosts = after
		if strings.Count(userinfo, ":") > 1 {
			return reasonColons
		}
		user, password, hasPassword := strings.Cut(userinfo, ":")
		for _, part := range []string{user, password} {
			if r := componentReason(part, "", reasonUserinfoChars); r != "" {
				return r
			}
		}
		given["user"] = user != ""
		given["password"] = hasPassword && password != ""
	}
	ok, hasPort := validHosts(hosts)
	if !ok {
		return reasonHosts
	}
	given["host"], given["port"] = hosts != "", hasPort
	if path, ok := strings.CutPrefix(tail, "/"); ok {
		db, query, _ := strings.Cut(path, "?")
		if r := componentReason(db, ":", reasonDatabase); r != "" {
			return r
		}
		given["database"] = db != ""
		tail = ""
		if query != "" || strings.Contains(path, "?") {
			tail = "?" + query
		}
	}
	if query, ok := strings.CutPrefix(tail, "?"); ok {
		return queryReason(query, given)
	}
	return ""
}

// queryReason checks a URL's query; given says which keys the URL's
// other parts set.
func queryReason(query string, given map[string]bool) string {
	if query == "" {
		return ""
	}
	keys := keySet{seen: given}
	for pair := range strings.SplitSeq(query, "&") {
		key, value, ok := strings.Cut(pair, "=")
		switch {
		case !ok || strings.Contains(value, "="):
			return reasonQueryPair
		case !isName(key):
			return reasonQueryKey
		}
		if r := componentReason(value, ":/", reasonQueryValue); r != "" {
			return r
		}
		if strings.Contains(value, "+") { // a space to form decoding, a "+" to pgx
			return reasonQueryValue
		}
		if !keys.add(key) {
			return reasonTwice
		}
	}
	if keys.settingBesideSecret() {
		return reasonSecretBeside
	}
	return ""
}

// componentReason checks a percent-encoded part of a URL: it may hold
// letters, digits, "-._~", "!$&'()*+,;=", the bytes of extra and %XX
// (not %00). notAllowed is the reason for any other character.
func componentReason(s, extra, notAllowed string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) || (s[i+1] == '0' && s[i+2] == '0') {
				return reasonPercent
			}
			i += 2
		case isUnreserved(c) || strings.IndexByte("!$&'()*+,;=", c) >= 0 || strings.IndexByte(extra, c) >= 0:
		default:
			return notAllowed
		}
	}
	return ""
}

// validHosts checks a URL's host list, HOST[:PORT] separated by ",",
// and reports whether it gives a port.
func validHosts(list string) (ok, hasPort bool) {
	for h := range strings.SplitSeq(list, ",") {
		host, port, withPort := strings.Cut(h, ":")
		if strings.HasPrefix(h, "[") {
			end := strings.IndexByte(h, ']')
			if end < 2 || !allBytes(h[1:end], func(c byte) bool { return isAlnum(c) || c == ':' || c == '.' || c == '%' }) {
				return false, false
			}
			host, port, withPort = "", h[end+1:], h[end+1:] != ""
			if withPort && port[0] != ':' {
				return false, false
			}
			port = strings.TrimPrefix(port, ":")
		}
		// Well-formed %XX, and otherwise unreserved characters only.
		if componentReason(host, "", "x") != "" || !allBytes(host, func(c byte) bool { return isUnreserved(c) || c == '%' }) {
			return false, false
		}
		if !allBytes(port, func(c byte) bool { return '0' <= c && c <= '9' }) {
			return false, false
		}
		hasPort = hasPort || withPort
	}
	return true, hasPort
}

// isName reports whether s is a key: letters, digits, "_" and ".", not
// empty.
func isName(s string) bool {
	return s != "" && allBytes(s, func(c byte) bool { return isAlnum(c) || c == '_' || c == '.' })
}

func allBytes(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func isUnreserved(c byte) bool { return isAlnum(c) || c == '-' || c == '.' || c == '_' || c == '~' }

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
