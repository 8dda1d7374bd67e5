package webhook

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultTolerance is how far a request's timestamp may be from the
// receiver's clock, either way, for Verifier.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify, for errors.Is.
var (
	// ErrMissingHeaders: HeaderID, HeaderTimestamp or HeaderSignature is
	// missing, empty, or too long to be the sink's.
	ErrMissingHeaders = errors.New("webhook: Standard Webhooks headers missing")
	// ErrTimestamp: HeaderTimestamp is not a Unix time, or is further
	// from now than the tolerance (a replay, or a clock that is off).
	ErrTimestamp = errors.New("webhook: timestamp outside the tolerance")
	// ErrSignature: no v1 signature in HeaderSignature matches the body
	// under any of the secrets.
	ErrSignature = errors.New("webhook: no valid signature")
)

// Limits a Verifier puts on what it reads, so that a hostile request
// costs little.
const (
	maxIDHeaderBytes        = 4 << 10 // an ID of 255 characters of 4 bytes, each %XX: 3,060
	maxSignatureHeaderBytes = 4 << 10
	maxSignatures           = 2 * MaxSecrets
)

// Verifier checks requests on the receiving side, as Standard Webhooks
// says: a v1 signature by one of Secrets over "id.timestamp.body", and a
// timestamp within Tolerance of now. It is safe for concurrent use once
// built; the zero Tolerance and Now mean the defaults.
type Verifier struct {
	// Secrets are the whsec_ secrets a request may be signed with (during
	// a rotation, the old and the new).
	Secrets []string
	// Tolerance is how far a timestamp may be from now, either way.
	// Defaults to DefaultTolerance.
	Tolerance time.Duration
	// Now is the receiver's clock. Defaults to time.Now.
	Now func() time.Time
}

// Verify checks header and body of a request against secrets with a
// tolerance (0 means DefaultTolerance): Verifier{Secrets: secrets,
// Tolerance: tolerance}.Verify(header, body).
func Verify(secrets []string, header http.Header, body []byte, tolerance time.Duration) error {
	return Verifier{Secrets: secrets, Tolerance: tolerance}.Verify(header, body)
}

// Verify returns nil if header carries a valid signature of body and a
// timestamp within the tolerance, and otherwise an error wrapping
// ErrMissingHeaders, ErrTimestamp or ErrSignature (or one that names a
// malformed secret). The signature is checked first, in constant time,
// so that a forged request learns nothing about the timestamp's check.
// Deduplicate by the HeaderID value (DecodeHeaderValue gives the
// message ID) once Verify passed.
func (v Verifier) Verify(header http.Header, body []byte) error {
	id, ts, sigs := header.Get(HeaderID), header.Get(HeaderTimestamp), header.Get(HeaderSignature)
	if id == "" || ts == "" || sigs == "" || len(id) > maxIDHeaderBytes || len(sigs) > maxSignatureHeaderBytes {
		return ErrMissingHeaders
	}
	when, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q is not a Unix time", ErrTimestamp, cutText(ts))
	}
	keys := make([][]byte, 0, len(v.Secrets))
	for i, secret := range v.Secrets {
		key, err := parseSecret(secret)
		if err != nil {
			return fmt.Errorf("webhook: Verifier.Secrets[%d]: %v", i, err)
		}
		keys = append(keys, key)
	}
	if !signedBy(keys, id, when, body, sigs) {
		return ErrSignature
	}
	tolerance, now := v.Tolerance, v.Now
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	if now == nil {
		now = time.Now
	}
	skew := now().Sub(time.Unix(when, 0))
	if skew > tolerance || skew < -tolerance {
		return fmt.Errorf("%w: %s is %v from now, beyond %v", ErrTimestamp, ts, skew.Round(time.Second), tolerance)
	}
	return nil
}

// signedBy reports whether one of the v1 signatures in sigs is that of
// one of keys.
func signedBy(keys [][]byte, id string, when int64, body []byte, sigs string) bool {
	want := make([][]byte, len(keys))
	for i, key := range keys {
		want[i] = signature(key, id, when, body)
	}
	found := false
	for n, sig := range strings.Fields(sigs) {
		if n == maxSignatures {
			break
		}
		encoded, ok := strings.CutPrefix(sig, "v1,")
		if !ok {
			continue // another scheme (v1a): not ours
		}
		got, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			continue
		}
		for _, w := range want {
			// Every comparison runs, match or not.
			found = hmac.Equal(got, w) || found
		}
	}
	return found
}

func cutText(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
