package pgdsn

import "strings"

// The reasons checkKeywords gives. Each is fixed: none quotes the DSN.
const (
	reasonNoEquals      = `a KEY=VALUE pair lacks its "="`
	reasonKeyName       = `a key is not a name (letters, digits, "_" and ".")`
	reasonUnclosed      = `a quoted value is not closed`
	reasonAfterQuote    = `a quoted value is followed by something other than a space`
	reasonLoneBackslash = `a value ends in a lone backslash`
	reasonControl       = `a control character stands outside quotes`
	reasonEquals        = `a value holds a "=" outside quotes (an empty value is written '')`
	reasonKeyTwice      = `a key is given twice`
	reasonKeySecret     = `with a password, a key is not a connection keyword (a server setting goes in options='-c NAME=VALUE')`
)

// checkKeywords checks a key=value DSN. It reads it as pgx does
// (parseKeywordValueSettings) and refuses what pgx would read
// otherwise than its writer probably meant.
func checkKeywords(dsn string) error {
	if reason := keywordReason(dsn); reason != "" {
		return &Error{Reason: reason, How: KeywordHow}
	}
	return nil
}

// keywordReason is the rule dsn breaks, or "".
func keywordReason(dsn string) string {
	keys := keySet{seen: map[string]bool{}}
	for s := strings.TrimLeft(dsn, spaces); s != ""; s = strings.TrimLeft(s, spaces) {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return reasonNoEquals
		}
		key := strings.Trim(s[:eq], spaces)
		if !isName(key) {
			return reasonKeyName
		}
		rest, reason := skipValue(strings.TrimLeft(s[eq+1:], spaces))
		if reason != "" {
			return reason
		}
		s = rest
		if !keys.add(key) {
			return reasonKeyTwice
		}
	}
	if keys.settingBesideSecret() {
		return reasonKeySecret
	}
	return ""
}

// skipValue reads the value at the start of s and returns what follows
// it, or the rule it breaks.
func skipValue(s string) (rest, reason string) {
	if strings.HasPrefix(s, "'") {
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '\'':
				if after := s[i+1:]; after != "" && strings.IndexByte(spaces, after[0]) < 0 {
					return "", reasonAfterQuote
				}
				return s[i+1:], ""
			}
		}
		return "", reasonUnclosed
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case strings.IndexByte(spaces, c) >= 0:
			return s[i:], ""
		case c == '\\':
			if i+1 == len(s) {
				return "", reasonLoneBackslash
			}
			i++
			if isControl(s[i]) && strings.IndexByte(spaces, s[i]) < 0 {
				return "", reasonControl
			}
		case isControl(c):
			return "", reasonControl
		case c == '=':
			return "", reasonEquals
		}
	}
	return "", ""
}

func isControl(c byte) bool { return c < 0x20 || c == 0x7f }
