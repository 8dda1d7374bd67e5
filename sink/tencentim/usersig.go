package tencentim

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tencentyun/tls-sig-api-v2-golang/tencentyun"
)

// signer keeps the admin's UserSig (TLSSigAPIv2, made by Tencent's
// official module), renews it when half its lifetime has passed, and on
// demand when Tencent no longer accepts it. Safe for concurrent use.
type signer struct {
	sdkAppID int
	key      string
	admin    string
	ttl      time.Duration
	now      func() time.Time
	log      *slog.Logger
	// gen signs; tencentyun.GenUserSig unless a test replaces it.
	gen func(sdkAppID int, key, identifier string, expireSeconds int) (string, error)

	mu       sync.Mutex
	sig      string
	renewAt  time.Time
	signings int
	// redact is what scrub removes: the key, then the current and the
	// previous UserSig, each followed by the HMAC inside it.
	redact []string
}

func newSigner(c Config) *signer {
	return &signer{
		sdkAppID: c.SDKAppID, key: c.SecretKey, admin: c.AdminIdentifier,
		ttl: c.UserSigTTL, now: c.Now, log: c.Logger, gen: tencentyun.GenUserSig,
		redact: []string{c.SecretKey},
	}
}

// redactions returns the secrets to scrub from text about a call signed
// with sig: the key, the current and the previous UserSig and the HMACs
// inside them, and sig if it is neither.
func (s *signer) redactions(sig string) []string {
	s.mu.Lock()
	out := append([]string(nil), s.redact...)
	s.mu.Unlock()
	if sig != "" && !slices.Contains(out, sig) {
		out = append(out, sig, userSigHMAC(sig))
	}
	return out
}

// get returns a valid UserSig, signing a new one when there is none or
// the current one is past half its lifetime.
func (s *signer) get() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sig != "" && s.now().Before(s.renewAt) {
		return s.sig, nil
	}
	return s.signLocked("scheduled")
}

// renew replaces rejected, the UserSig Tencent refused, with a new one.
// When concurrent calls were refused with the same UserSig, only the
// first signs; the others get the new UserSig.
func (s *signer) renew(rejected string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sig != rejected && s.sig != "" {
		return s.sig, nil
	}
	return s.signLocked("rejected by Tencent")
}

func (s *signer) signLocked(reason string) (string, error) {
	sig, err := s.gen(s.sdkAppID, s.key, s.admin, int(s.ttl/time.Second))
	if err != nil {
		// The module's errors come from JSON and zlib encoding; they do
		// not carry the key, but say only what failed, to be sure.
		return "", fmt.Errorf("tencentim: cannot sign a UserSig for %q", s.admin)
	}
	s.sig = sig
	s.redact = append([]string{s.key, sig, userSigHMAC(sig)}, s.redact[1:min(3, len(s.redact))]...)
	s.renewAt = s.now().Add(s.ttl / 2)
	s.signings++
	s.log.Debug("tencentim: signed a new admin UserSig", slog.String("reason", reason),
		slog.String("identifier", s.admin), slog.Duration("ttl", s.ttl))
	return sig, nil
}

// userSigHMAC returns the HMAC inside a UserSig (the TLS.sig field of its
// JSON document, in standard base64 as the document holds it): the part
// that makes it valid, which an upstream might echo after decoding the
// UserSig. "" if sig does not decode.
func userSigHMAC(sig string) string {
	b, err := base64.StdEncoding.DecodeString(strings.NewReplacer("*", "+", "-", "/", "_", "=").Replace(sig))
	if err != nil {
		return ""
	}
	zr, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return ""
	}
	doc, err := io.ReadAll(io.LimitReader(zr, 8<<10))
	if err != nil {
		return ""
	}
	var parsed struct {
		HMAC string `json:"TLS.sig"`
	}
	if json.Unmarshal(doc, &parsed) != nil {
		return ""
	}
	return parsed.HMAC
}
