package tencentim

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/outboxrelay/outboxrelay/outbox/backend"
)

// FuzzResponse: any answer from Tencent (or from a proxy in front of it)
// gives nil or an *Error, never a panic, and the error text never carries
// the secret key or the UserSig, even when the answer echoes them.
func FuzzResponse(f *testing.F) {
	const secret, sig = "fuzz-secret-key-0123456789", "eAEAfuzzSignatureValue0123456789abcdef"
	for _, body := range []string{
		`{"ActionStatus":"OK","ErrorCode":0,"ErrorInfo":"","MsgSeq":1}`,
		`{"ActionStatus":"FAIL","ErrorCode":10010,"ErrorInfo":"group not found"}`,
		`{"ActionStatus":"FAIL","ErrorCode":70001,"ErrorInfo":"usersig ` + sig + ` expired"}`,
		`{"ActionStatus":"FAIL","ErrorCode":0,"ErrorInfo":"key ` + secret + `"}`,
		`{"ActionStatus":"` + secret + `","ErrorCode":0}`,
		`<html><body>502 Bad Gateway</body></html>`,
		``, `{}`, `null`, `{"ErrorCode":"10002"}`,
	} {
		f.Add(200, body)
	}
	f.Add(502, "")
	f.Add(429, `{"ActionStatus":"OK"}`)
	s, err := New(Config{BaseURL: "http://127.0.0.1:1", SDKAppID: 1, SecretKey: secret, AdminIdentifier: "admin"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, body string) {
		err := s.interpret(APISendGroupMsg, sig, status, []byte(body))
		if err == nil {
			return
		}
		text := err.Error()
		if !strings.HasPrefix(text, "tencentim: ") || !strings.HasSuffix(text, " ("+APISendGroupMsg+")") {
			t.Fatalf("error without its prefix or the API name: %q", text)
		}
		if strings.Contains(text, secret) || strings.Contains(text, sig) {
			t.Fatalf("error leaks a secret: %q", text)
		}
	})
}

// Secrets of FuzzScrub: a UserSig signed with fuzzKey (fixed, so that a
// find reproduces; it holds '*', '-' and '_'), and the key.
const (
	fuzzKey = "5bd2850fff3ecb11d7c805251c51ee463a25727bddc2385f3fa8bfee1bb93b5e"
	fuzzSig = "eAEAqABX-3siVExTLnZlciI6IjIuMCIsIlRMUy5pZGVudGlmaWVyIjoiYWRtaW4iLCJUTFMuc2RrYXBwaWQiOjE0MDAwMDAwMDEsIlRMUy5leHBpcmUiOjUxODQwMCwiVExTLnRpbWUiOjE3OTYwODI0NDQsIlRMUy5zaWciOiI3VDV0RElCek5ScXZmL25YNTJ2WlYrdDNaeXJYbk5YUDNsd0NCUzRmN3FZPSJ9CgEAAP--*cEw5w__"
)

// echoForms are the ways FuzzScrub writes a piece of a secret into the
// text, chosen by the fuzzer.
var echoForms = []func(string) string{
	func(s string) string { return s },
	url.QueryEscape,
	func(s string) string { return lowerHex(url.QueryEscape(s)) },
	url.PathEscape,
	func(s string) string { return encodeEvery(s, "%%%02X") },
	func(s string) string { return encodeEvery(s, "%%%02x") },
	func(s string) string { return url.QueryEscape(url.QueryEscape(s)) },
	func(s string) string { return strings.NewReplacer("*", "+", "-", "/", "_", "=").Replace(s) },
}

func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toLower(b[i+1]), toLower(b[i+2])
		}
	}
	return string(b)
}

func toLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func encodeEvery(s, format string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, format, s[i])
	}
	return b.String()
}

// fuzzEcho builds the text FuzzScrub scrubs: fuzz text around a piece of
// a secret (which: the UserSig, the key or the HMAC inside the UserSig)
// of at least leakRun bytes from offset off (n = 0: all of it), written
// in echo form form, behind a usersig parameter whose letters' case
// caseMask picks when param is odd.
func fuzzEcho(secrets []string, prefix, suffix string, which, form, param uint8, off, n, caseMask uint16) (text, echo string) {
	secret := secrets[int(which)%len(secrets)]
	piece := secret
	if n > 0 {
		start := int(off) % (len(secret) - leakRun + 1)
		piece = secret[start : start+leakRun+int(n)%(len(secret)-start-leakRun+1)]
	}
	echo = echoForms[int(form)%len(echoForms)](piece)
	if param%2 == 1 {
		name := []byte("usersig")
		for i := range name {
			if caseMask&(1<<i) != 0 {
				name[i] -= 'a' - 'A'
			}
		}
		sep := []string{"=", "%3D", "%3d", `": "`, ": "}[int(param/2)%5]
		echo = string(name) + sep + echo
	}
	return prefix + echo + suffix, echo
}

// FuzzScrub: whatever text surrounds an echo of the key, the UserSig or
// the HMAC inside it (whole or any run of at least leakRun bytes; raw,
// percent-encoded in either hex case, query- or path-escaped, encoded
// twice, in the standard base64 alphabet; behind a usersig parameter in
// any case), the scrubbed text holds no run of leakRun bytes of any of
// them in any of the forms scrub sees through, is valid UTF-8 and at
// most maxScrubBytes long.
func FuzzScrub(f *testing.F) {
	hmac := userSigHMAC(fuzzSig)
	if len(hmac) < leakRun {
		f.Fatalf("no HMAC in the fuzz UserSig: %q", hmac)
	}
	secrets := []string{fuzzSig, fuzzKey, hmac}
	for which := range uint8(3) {
		for form := range uint8(len(echoForms)) {
			f.Add("ErrorInfo: ", " expired", which, form, uint8(0), uint16(0), uint16(0), uint16(0))
			f.Add("x", "&random=1", which, form, form*2+1, uint16(form)*7, uint16(1), uint16(form)*13)
		}
	}
	f.Add("", "", uint8(0), uint8(0), uint8(3), uint16(200), uint16(40), uint16(0x7f))
	f.Add("next=https://h/v4/a?sdkappid=1&", "\xff\xfe", uint8(0), uint8(6), uint8(1), uint16(5), uint16(0), uint16(0))
	f.Add(strings.Repeat("é", 3000), "[redacted]", uint8(2), uint8(4), uint8(9), uint16(3), uint16(9), uint16(1))
	f.Fuzz(func(t *testing.T, prefix, suffix string, which, form, param uint8, off, n, caseMask uint16) {
		// Text beyond maxScrubBytes is cut before scrubbing: longer
		// fuzz text would only slow the search.
		prefix, suffix = backend.Truncate(prefix, 2*maxScrubBytes), backend.Truncate(suffix, maxScrubBytes)
		text, echo := fuzzEcho(secrets, prefix, suffix, which, form, param, off, n, caseMask)
		if _, ok := findRun(echo, secrets); !ok {
			t.Fatalf("the harness wrote no secret into %q", echo)
		}
		out := scrub(text, secrets)
		if !utf8.ValidString(out) || len(out) > maxScrubBytes {
			t.Fatalf("scrub gave %d bytes, valid UTF-8 %v", len(out), utf8.ValidString(out))
		}
		if run, ok := findRun(out, secrets); ok {
			t.Fatalf("scrubbed text holds %q:\nin:  %q\nout: %q", run, text, out)
		}
	})
}

// findRun looks for a run of leakRun bytes of a secret in text and in
// its percent-decodings, up to maxDecodeLevels, folded by equiv.
func findRun(text string, secrets []string) (string, bool) {
	v := newView(text)
	for level := 0; ; level++ {
		folded := string(fold(v.b))
		for _, s := range secrets {
			fs := string(fold([]byte(s)))
			for i := 0; i+leakRun <= len(fs); i++ {
				if strings.Contains(folded, fs[i:i+leakRun]) {
					return s[i : i+leakRun], true
				}
			}
		}
		next, changed := v.decode()
		if level == maxDecodeLevels || !changed {
			return "", false
		}
		v = next
	}
}
