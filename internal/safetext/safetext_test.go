package safetext

import "testing"

func TestEscape(t *testing.T) {
	for _, tc := range []struct {
		in        string
		keepLines bool
		want      string
	}{
		{"plain <b>", false, "plain <b>"},
		{"red \x1b[31m", false, `red \u001b[31m`},
		{"bad \xff byte", false, `bad \xff byte`},
		{"two\nlines\t", false, `two\u000alines\u0009`},
		{"two\nlines\t", true, "two\nlines\t"},
		{"bidi \u202e", true, `bidi \u202e`},
		{"sep \u2028", true, `sep \u2028`},
		{"日本", false, "日本"},
	} {
		if got := Escape(tc.in, tc.keepLines); got != tc.want {
			t.Errorf("Escape(%q, %v) = %q, want %q", tc.in, tc.keepLines, got, tc.want)
		}
	}
}

func TestShort(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"much longer text", 5, "much…"},
		{"\x1b", 10, `\u001b`},
	} {
		if got := Short(tc.in, tc.n); got != tc.want {
			t.Errorf("Short(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
