package secretfmt

import "testing"

func TestSplitURL(t *testing.T) {
	for _, c := range []struct {
		raw  string
		want URLParts
	}{
		{"https://host/path", URLParts{Scheme: "https://", HostPath: "host/path"}},
		{"https://u:p/w@host:8443/p?token=1#f", URLParts{"https://", "u:p/w@", "host:8443/p", "?token=1#f"}},
		{"u@host#frag?x", URLParts{User: "u@", HostPath: "host", Tail: "#frag?x"}},
		{"", URLParts{}},
	} {
		got := SplitURL(c.raw)
		if got != c.want {
			t.Errorf("SplitURL(%q) = %+v, want %+v", c.raw, got, c.want)
		}
		if joined := got.Scheme + got.User + got.HostPath + got.Tail; joined != c.raw {
			t.Errorf("SplitURL(%q)'s parts join to %q", c.raw, joined)
		}
	}
}
