package tencentim_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
)

// leakRun is the length of a run of a secret that counts as a leak.
const leakRun = 16

// requireNoSecret fails if text holds any of secrets, or any leakRun
// consecutive characters of one, raw or hex-encoded (as %x prints), in
// the text as it is or percent-decoded up to three times.
func requireNoSecret(t *testing.T, text, what string, secrets ...string) {
	t.Helper()
	texts := []string{text}
	for range 3 {
		texts = append(texts, percentDecode(texts[len(texts)-1]))
	}
	for _, s := range secrets {
		for _, form := range []string{s, hex.EncodeToString([]byte(s)), strings.ToUpper(hex.EncodeToString([]byte(s)))} {
			run := min(leakRun, len(form))
			for i := 0; i+run <= len(form); i++ {
				for _, text := range texts {
					if strings.Contains(text, form[i:i+run]) {
						require.Failf(t, "secret leaked", "%s: %q holds %q", what, text, form[i:i+run])
					}
				}
			}
		}
	}
}

// percentDecode decodes every %XX in s, leaving any other '%' as it is.
func percentDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := hex.DecodeString(s[i+1 : i+3]); err == nil {
				b.WriteByte(v[0])
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lastUserSig is the UserSig of the last call the fake saw.
func lastUserSig(t *testing.T, reqs []tencentimtest.Request) string {
	t.Helper()
	require.NotEmpty(t, reqs)
	sig := reqs[len(reqs)-1].Query["usersig"]
	require.NotEmpty(t, sig)
	return sig
}

// formats renders v with every verb and both slog handlers.
func formats(v any) map[string]string {
	out := map[string]string{}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		out[verb] = fmt.Sprintf(verb, v)
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("m", slog.Any("v", v))
	slog.New(slog.NewJSONHandler(&js, nil)).Info("m", slog.Any("v", v))
	out["slog text"], out["slog json"] = text.String(), js.String()
	return out
}

func TestSinkFormattingHidesTheKeyAndUserSig(t *testing.T) {
	f := newFake(t)
	s := newSink(t, f, nil)
	require.NoError(t, s.Publish(context.Background(), roomMsg("evt-f", "room-1", "RoomUserJoined")))
	sig := lastUserSig(t, f.Requests()) // cached in the sink now
	for name, v := range map[string]any{"*Sink": s, "Sink": *s} {
		for how, text := range formats(v) {
			requireNoSecret(t, text, name+" "+how, secret, sig)
		}
		require.Equal(t, fmt.Sprint(v), fmt.Sprintf("%+v", v))
		require.Equal(t, fmt.Sprint(v), fmt.Sprintf("%#v", v))
		require.Contains(t, fmt.Sprint(v), `tencentim.Sink{BaseURL:"http://127.0.0.1:`)
	}
}

func TestConfigFormattingAndJSONHideTheKey(t *testing.T) {
	cfg := tencentim.Config{BaseURL: "https://console.tim.qq.com", SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin}
	for name, v := range map[string]any{"Config": cfg, "*Config": &cfg} {
		for how, text := range formats(v) {
			requireNoSecret(t, text, name+" "+how, secret)
		}
		b, err := json.Marshal(v)
		require.NoError(t, err, "a config marshals (without its key), e.g. for a debug endpoint")
		requireNoSecret(t, string(b), name+" json", secret)
		require.Contains(t, string(b), `"SecretKey":"[redacted]"`)
	}
}

func TestBaseURLMustBeHTTPSUnlessLoopback(t *testing.T) {
	cases := []struct {
		url string
		ok  bool
	}{
		{"https://console.tim.qq.com", true},
		{"https://adminapisgp.im.qcloud.com/", true},
		{"http://localhost:8080", true},
		{"http://LOCALHOST", true},
		{"http://127.0.0.1:1", true},
		{"http://127.9.8.7", true},
		{"http://[::1]:9000", true},
		{"http://console.tim.qq.com", false},
		{"http://10.0.0.5:8080", false},
		{"http://localhost.example.com", false},
		{"http://0.0.0.0:80", false},
	}
	for _, tc := range cases {
		_, err := tencentim.New(tencentim.Config{BaseURL: tc.url, SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin})
		if tc.ok {
			require.NoError(t, err, tc.url)
			continue
		}
		require.ErrorContains(t, err, fmt.Sprintf("tencentim: BaseURL %q: must use https", tc.url), tc.url)
		require.ErrorContains(t, err, "loopback", tc.url)
	}
}

func TestBaseURLUserInfoIsRedactedAndRejected(t *testing.T) {
	const pw = "hunter2-Pa55word"
	cfg := tencentim.Config{BaseURL: "https://ops:" + pw + "@console.tim.qq.com/", SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin}
	for how, text := range formats(cfg) {
		requireNoSecret(t, text, how, secret, pw)
		require.NotContains(t, text, "ops:", how)
	}
	_, err := tencentim.New(cfg)
	require.ErrorContains(t, err, "tencentim: BaseURL")
	require.ErrorContains(t, err, "user information")
	requireNoSecret(t, err.Error(), "validation error", secret, pw)

	// Even a URL that does not parse keeps its password out of the error.
	cfg.BaseURL = "https://ops:" + pw + "@console.tim.qq.com:port/"
	_, err = tencentim.New(cfg)
	require.ErrorContains(t, err, "tencentim: BaseURL")
	requireNoSecret(t, err.Error(), "unparseable URL error", pw)
}

// echoCases are ErrorInfos that echo the UserSig (or the key) in the
// forms a careless upstream, proxy or gateway might.
var echoCases = []struct {
	name string
	info func(sig string) string
}{
	{"raw", func(sig string) string { return "bad signature " + sig }},
	{"query-escaped", func(sig string) string { return "UserSig=" + url.QueryEscape(sig) + " rejected" }},
	{"lower-case hex", func(sig string) string { return "sig " + strings.ReplaceAll(url.QueryEscape(sig), "%2A", "%2a") }},
	{"every byte encoded", func(sig string) string { return "sig " + encodeAll(sig) }},
	{"double-encoded", func(sig string) string { return "next=" + url.QueryEscape("usersig="+url.QueryEscape(sig)) }},
	{"standard base64", func(sig string) string {
		return "sig " + strings.NewReplacer("*", "+", "-", "/", "_", "=").Replace(sig)
	}},
	{"upper-case parameter", func(sig string) string { return "USERSIG=" + sig + "&random=1" }},
	{"mixed-case parameter, unknown value", func(string) string { return "previous UsErSiG=eAEAstaleSignatureFromAnEarlierCall0123 failed" }},
	{"encoded equals", func(string) string { return "usersig%3DeAEAstaleSignature%2AFromAnEarlierCall" }},
	{"JSON-style parameter", func(string) string { return `{"UserSig": "eAEAstaleSignatureFromAnEarlierCall"}` }},
	{"16 characters", func(sig string) string { return "fragment " + sig[20:36] + " ends" }},
	{"a long middle part", func(sig string) string { return "fragment " + sig[5:len(sig)-5] }},
	{"two fragments", func(sig string) string { return sig[:16] + " and " + sig[len(sig)-20:] }},
	{"the HMAC inside", func(sig string) string { return `{"TLS.sig":"` + hmacOf(sig) + `"}` }},
	{"key", func(string) string { return "key=" + secret }},
	{"key fragment", func(string) string { return "k " + secret[3:19] }},
	{"key encoded", func(string) string { return "k " + encodeAll(secret) }},
}

// hmacOf decodes a UserSig (TLSSigAPIv2: zlib, then base64 with '*', '-'
// and '_' for '+', '/' and '=') and returns its TLS.sig, the HMAC.
func hmacOf(sig string) string {
	b, err := base64.StdEncoding.DecodeString(strings.NewReplacer("*", "+", "-", "/", "_", "=").Replace(sig))
	if err != nil {
		panic(err)
	}
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	var doc struct {
		HMAC string `json:"TLS.sig"`
	}
	if err := json.NewDecoder(zr).Decode(&doc); err != nil || len(doc.HMAC) < leakRun {
		panic(fmt.Sprintf("no TLS.sig in the UserSig: %v", err))
	}
	return doc.HMAC
}

// encodeAll percent-encodes every byte of s.
func encodeAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// sinkWithStarInSig returns a fake and a sink whose cached UserSig holds
// a '*', which query escaping writes as %2A: it tries admin identifiers
// until one signs that way (many UserSigs have no '*').
//
// The UserSig is base64 of an uncompressed zlib stream, so whether it
// holds a '*' depends on where the HMAC text falls against base64's
// 3-byte groups. The identifiers' lengths cycle through all three
// alignments: with "admin-<i>" alone (two lengths) 3.6% of the seconds
// had no '*' in 64 tries, and the test failed in CI. A simulation of
// 20,000 seconds found none without a '*' in 256 tries of these.
func sinkWithStarInSig(t *testing.T) (*tencentimtest.Server, *tencentim.Sink, string) {
	t.Helper()
	for i := range 256 {
		id := fmt.Sprintf("admin-%s%d", strings.Repeat("x", i%3), i)
		f := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: appID, SecretKey: secret, AdminIdentifier: id})
		t.Cleanup(f.Close)
		s := newSink(t, f, func(c *tencentim.Config) { c.AdminIdentifier, c.RateLimit, c.GroupRateLimit = id, -1, -1 })
		require.NoError(t, s.Publish(context.Background(), roomMsg("evt-sig", "room-1", "RoomUserJoined")))
		if sig := lastUserSig(t, f.Requests()); strings.Contains(sig, "*") {
			require.Contains(t, url.QueryEscape(sig), "%2A")
			return f, s, sig
		}
	}
	t.Fatal("no UserSig with a '*' in 256 tries")
	return nil, nil, ""
}

func TestErrorInfoEchoesAreScrubbed(t *testing.T) {
	f, s, sig := sinkWithStarInSig(t)
	for _, tc := range echoCases {
		t.Run(tc.name, func(t *testing.T) {
			f.FailNextWith(1, 10010, tc.info)
			err := s.Publish(context.Background(), roomMsg("evt-e", "room-1", "RoomUserJoined"))
			require.ErrorContains(t, err, "ErrorCode 10010")
			require.Equal(t, sig, lastUserSig(t, f.Requests()), "the cached UserSig was echoed")
			requireNoSecret(t, err.Error(), tc.name, secret, sig, hmacOf(sig), "eAEAstaleSignatureFromAnEarlierCall")
			require.NotRegexp(t, `(?i)usersig(=|%3D|"?:\s*")[^\[]`, err.Error())
		})
	}
}

// leakyTransport fails every call with an error that quotes the request
// URL, UserSig and all, as an instrumented transport or a proxy client
// might.
type leakyTransport struct{ wrap error }

type leakyError struct {
	url  string
	wrap error
}

func (e *leakyError) Error() string { return "round trip to " + e.url + " failed" }
func (e *leakyError) Unwrap() error { return e.wrap }

func (l leakyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, &leakyError{url: r.URL.String(), wrap: l.wrap}
}

// walk calls visit on err and every error reachable from it through
// Unwrap() error and Unwrap() []error.
func walk(err error, visit func(error)) {
	if err == nil {
		return
	}
	visit(err)
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		walk(u.Unwrap(), visit)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walk(e, visit)
		}
	}
}

// requireCleanChain formats every node of err's Unwrap tree.
func requireCleanChain(t *testing.T, err error, secrets ...string) {
	t.Helper()
	walk(err, func(e error) {
		for how, text := range formats(e) {
			requireNoSecret(t, text, fmt.Sprintf("%T %s", e, how), secrets...)
			require.NotContains(t, text, "sdkappid=", how)
		}
	})
}

func TestErrorChainHoldsNoSecret(t *testing.T) {
	f := newFake(t)
	m := roomMsg("evt-c", "room-1", "RoomUserJoined")
	leaky := newSink(t, f, func(c *tencentim.Config) { c.HTTPClient = &http.Client{Transport: leakyTransport{}} })
	err := leaky.Publish(context.Background(), m)
	require.Error(t, err)
	require.False(t, outbox.IsPermanent(err))
	var le *leakyError
	require.False(t, errors.As(err, &le), "the transport's own error is not reachable")
	requireCleanChain(t, err, secret)
	require.NotContains(t, fmt.Sprint(err), "usersig=e")

	// A transport error that wraps the deadline still says so.
	late := newSink(t, f, func(c *tencentim.Config) {
		c.HTTPClient = &http.Client{Transport: leakyTransport{wrap: context.DeadlineExceeded}}
	})
	err = late.Publish(context.Background(), m)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	requireCleanChain(t, err, secret)

	// The caller's own deadline, against a server that does not answer.
	s := newSink(t, f, nil)
	require.NoError(t, s.Publish(context.Background(), m))
	sig := lastUserSig(t, f.Requests()) // the UserSig of the hanging call too
	err = publishHung(t, f, s, m)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, errors.Is(err, context.Canceled))
	requireCleanChain(t, err, secret, sig)

	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.Publish(canceled, m)
	require.ErrorIs(t, err, context.Canceled)
	requireCleanChain(t, err, secret, sig)
}
