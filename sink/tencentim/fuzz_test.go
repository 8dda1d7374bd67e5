package tencentim

import (
	"strings"
	"testing"
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
		if !strings.HasPrefix(text, "tencentim: "+APISendGroupMsg) {
			t.Fatalf("error without the API name: %q", text)
		}
		if strings.Contains(text, secret) || strings.Contains(text, sig) {
			t.Fatalf("error leaks a secret: %q", text)
		}
	})
}
