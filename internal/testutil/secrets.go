package testutil

import (
	"fmt"
	"strings"
	"testing"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// HostilePassword is a password that DSN handling has got wrong, and why
// it is in the table.
type HostilePassword struct {
	Name, Password string
}

// HostilePasswords are passwords with every character a DSN gives a
// meaning to, and ones that repeat the rest of a DSN. Each but the
// repeating ones holds a run (Zq8v) found in no message, so that a
// leak shows whatever escaping the output applies to the rest.
var HostilePasswords = []HostilePassword{
	{"issue 37's pasted password", "S3cret-pg-PW"},
	{"issue 37's @ and #", "p@ss#w0rd"},
	{"issue 37's @ and :", "p@ss:w0rd"},
	{"slash", "Xy/Zq8v"},
	{"at", "Xy@Zq8v"},
	{"hash", "Xy#Zq8v"},
	{"colon", "Xy:Zq8v"},
	{"question mark", "Xy?Zq8v"},
	{"percent", "Xy%Zq8v"},
	{"space", "Xy Zq8v"},
	{"ampersand and equals", "Xy&Zq8v=Wk3j"},
	{"quote", "'Xy'Zq8v"},
	{"backslash", `Xy\Zq8v\`},
	{"all of them", `/@#:?% &='\Zq8v`},
	{"non-ASCII", "Pässwört-Zq8v-密码"},
	{"invalid UTF-8", "\xff\xfeZq8v\xfd"},
	{"control characters", "Zq8v\x01\x7f\x1b[31m\tKw3j"},
	{"very long", strings.Repeat("Zq8vLong", 256)},
	{"empty", ""},
	{"one letter that is everywhere", "p"},
	{"the PostgreSQL user", "postgres"},
	{"the MySQL user", "root"},
	{"the host", "127.0.0.1"},
	{"the PostgreSQL port", "5432"},
	{"the MySQL port", "3306"},
	{"part of the MySQL address", "tcp("},
	{"a query value", "disable"},
}

// RequireNoPasswordFragments fails t when text shows a piece of password
// of secretfmt.MinFragment (4) bytes or more that no public text holds
// (the DSN without its password, say: a password that repeats the user
// name cannot be told from it). It looks for every substring of that
// length or more: a text holds one if and only if it holds one of the
// password's 4-byte pieces.
func RequireNoPasswordFragments(t testing.TB, text, password string, public ...string) {
	t.Helper()
	if pieces := secretfmt.Fragments(text, password, public...); len(pieces) > 0 {
		t.Fatalf("the password %q shows, in pieces %q:\n%s", password, pieces, text)
	}
}

// DSNForm is one way of writing a password into a DSN.
type DSNForm struct {
	Name string
	// DSN is the DSN with password written in this form.
	DSN func(password string) string
	// Refused reports whether a DSN of this form with password is one
	// that does not parse unambiguously, which must be refused.
	Refused func(password string) bool
}

// PostgresDSNForms are the forms of a PostgreSQL DSN of user on host
// (HOST:PORT) and database: the URL with the password as it is and
// percent-encoded, and key=value with it as it is and quoted.
func PostgresDSNForms(user, host, database string) []DSNForm {
	h, port, _ := strings.Cut(host, ":")
	// The database before the password: a password that runs into the
	// next pair (an empty one, one ending in a backslash) must not take
	// the database with it, and connect to the server's default one.
	keywords := func(pw string) string {
		return "host=" + h + " port=" + port + " user=" + user + " dbname=" + database + " password=" + pw + " sslmode=disable"
	}
	return []DSNForm{
		{"URL", func(pw string) string {
			return "postgres://" + user + ":" + pw + "@" + host + "/" + database + "?sslmode=disable"
		}, func(pw string) bool {
			return strings.ContainsFunc(pw, func(r rune) bool { return !strings.ContainsRune(urlSafe, r) })
		}},
		{"URL, percent-encoded", func(pw string) string {
			return "postgres://" + user + ":" + percentEncode(pw) + "@" + host + "/" + database + "?sslmode=disable"
		}, func(string) bool { return false }},
		{"key=value", keywords, func(pw string) bool {
			return pw == "" || strings.ContainsFunc(pw, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' || r == '=' }) ||
				strings.HasPrefix(pw, "'") || strings.HasSuffix(pw, `\`) && !strings.HasSuffix(pw, `\\`)
		}},
		{"key=value, quoted", func(pw string) string {
			return keywords("'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(pw) + "'")
		}, func(string) bool { return false }},
	}
}

// MySQLDSNForm is go-sql-driver/mysql's DSN of user on addr (HOST:PORT)
// and database, which takes any password as it is.
func MySQLDSNForm(user, addr, database string) DSNForm {
	return DSNForm{"go-sql-driver/mysql", func(pw string) string {
		return user + ":" + pw + "@tcp(" + addr + ")/" + database
	}, func(string) bool { return false }}
}

// urlSafe are the characters a URL's password may hold as they are.
const urlSafe = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;="

// percentEncode writes every byte of s but letters and digits as %XX.
func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
