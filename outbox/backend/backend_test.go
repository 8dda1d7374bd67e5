package backend

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijkl", 10, "abcdefg…"},
		{"ééééééé", 10, "ééé…"}, // 7 bytes left for 2-byte runes: never split
		{"abcdef", 2, "ab"},
		{"éé", 3, "é"},
		{"abc", 0, ""},
		{"\xff\xfe\xfd", 10, "\ufffd"},           // a run of invalid bytes is one replacement
		{"ok\xc3(", 10, "ok\ufffd("},             // a character cut in the middle
		{"ab\xffcdefghijk", 10, "ab\ufffdcd…"},   // replaced before it is cut
		{"nul\x00\x1b[0m", 10, "nul\x00\x1b[0m"}, // control characters stay
		{strings.Repeat("\xff", 1000), 10, "\ufffd…"},
	}
	for _, tc := range tests {
		got := Truncate(tc.in, tc.max)
		require.Equal(t, tc.want, got, "%q/%d", tc.in, tc.max)
		require.LessOrEqual(t, len(got), max(tc.max, 0))
		require.True(t, utf8.ValidString(got))
	}
}

// FuzzTruncate: whatever the input, the output is valid UTF-8 within the
// bound, and an input that is valid and short enough comes back as it is.
func FuzzTruncate(f *testing.F) {
	for _, s := range []string{"", "abc", "\xff\xfe", "é\xc3", strings.Repeat("€", 200), "\x00\r\n"} {
		f.Add(s, 16)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n % 4096
		got := Truncate(s, n)
		if !utf8.ValidString(got) || len(got) > max(n, 0) {
			t.Fatalf("Truncate(%q, %d) = %q: invalid or too long", s, n, got)
		}
		if utf8.ValidString(s) && len(s) <= n && got != s {
			t.Fatalf("Truncate(%q, %d) = %q: changed a valid text that fits", s, n, got)
		}
	})
}

func TestMessageValidate(t *testing.T) {
	long := strings.Repeat("x", 256)
	tests := []struct {
		name string
		m    Message
		want string // "" = valid
	}{
		{"minimal", Message{ID: "e", Type: "T"}, ""},
		{"full", Message{ID: "e", Key: "room", Type: "T", Payload: []byte("{}"), Headers: map[string]string{"a": "b"}}, ""},
		{"max lengths in characters", Message{ID: strings.Repeat("中", 255), Type: strings.Repeat("t", 255), Key: strings.Repeat("k", 255)}, ""},
		{"empty ID", Message{Type: "T"}, "ID is empty"},
		{"empty type", Message{ID: "e"}, "Type is empty"},
		{"long ID", Message{ID: long, Type: "T"}, "ID is longer than 255"},
		{"long type", Message{ID: "e", Type: long}, "Type is longer than 255"},
		{"long key", Message{ID: "e", Type: "T", Key: long}, "Key is longer than 255"},
		{"invalid UTF-8 ID", Message{ID: "\xc3", Type: "T"}, "ID is not valid UTF-8"},
		{"invalid UTF-8 key", Message{ID: "e", Type: "T", Key: "k\xff"}, "Key is not valid UTF-8"},
		{"empty header name", Message{ID: "e", Type: "T", Headers: map[string]string{"": "v"}}, "a header name is empty"},
		{"invalid UTF-8 header name", Message{ID: "e", Type: "T", Headers: map[string]string{"\xff": "v"}}, "header name"},
		{"invalid UTF-8 header value", Message{ID: "e", Type: "T", Headers: map[string]string{"h": "\xc3("}}, `the value of header "h" is not valid UTF-8`},
		{"control characters are fine", Message{ID: "e\x00", Type: "T\t", Key: "\x01", Headers: map[string]string{"h\r\n": "\x00"}}, ""},
	}
	for _, tc := range tests {
		err := tc.m.Validate()
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidMessage, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
}

// nilStore is a test's fake that embeds a nil Store: calling a method it
// does not have panics.
type nilStore struct{ Store }

// A fake that embeds a nil Store has no capabilities; NewWorker, which
// reads them, does not panic on it (the fakes of earlier versions did
// not need a Capabilities method).
func TestCapabilitiesOfAFakeWithANilStore(t *testing.T) {
	if got := CapabilitiesOf(nilStore{}); got != (Capabilities{}) {
		t.Fatalf("CapabilitiesOf(a fake on a nil Store) = %+v, want none", got)
	}
}

func TestClaimParamsValidate(t *testing.T) {
	ok := ClaimParams{Owner: "w1", Limit: 2, LeaseFor: time.Microsecond, IDs: []string{"a", "b"}}
	require.NoError(t, ok.Validate("test store"))
	for _, tc := range []struct {
		name   string
		change func(*ClaimParams)
		want   string
	}{
		{"no owner", func(p *ClaimParams) { p.Owner = "" }, `test store: claim: Owner "": must be 1 to 255 characters`},
		{"owner too long", func(p *ClaimParams) { p.Owner = strings.Repeat("é", MaxOwnerLength+1) }, `test store: claim: Owner "` + strings.Repeat("é", MaxOwnerLength+1) + `": must be 1 to 255 characters`},
		{"limit 0", func(p *ClaimParams) { p.Limit, p.IDs = 0, nil }, "test store: claim: Limit 0: must be 1 to 10000"},
		{"limit too large", func(p *ClaimParams) { p.Limit = MaxClaimLimit + 1 }, "test store: claim: Limit 10001: must be 1 to 10000"},
		{"lease under 1µs", func(p *ClaimParams) { p.LeaseFor = 999 * time.Nanosecond }, "test store: claim: LeaseFor 999ns: must be at least 1µs"},
		{"more IDs than the limit", func(p *ClaimParams) { p.Limit = 1 }, "test store: claim: 2 IDs: more than Limit 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.change(&p)
			require.EqualError(t, p.Validate("test store"), tc.want)
		})
	}
	// Every field that is wrong is reported, each with the prefix.
	err := ClaimParams{LeaseFor: -time.Second}.Validate("test store")
	require.Equal(t, 3, strings.Count(err.Error(), "test store: claim: "))
}
