package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// The Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	// HeaderID carries the message ID (Message.ID, encoded by
	// EncodeHeaderValue): the same on every attempt, so receivers
	// deduplicate by it.
	HeaderID = "Webhook-Id"
	// HeaderTimestamp carries the attempt's time, in Unix seconds.
	HeaderTimestamp = "Webhook-Timestamp"
	// HeaderSignature carries one signature per secret, space-separated:
	// "v1,<base64 HMAC-SHA256 of id.timestamp.body>".
	HeaderSignature = "Webhook-Signature"
)

// Headers the sink adds that are not Standard Webhooks': the message's
// type and key, encoded by EncodeHeaderValue. The key's header is left
// out when the key is empty.
const (
	HeaderEventType = "Outbox-Event-Type"
	HeaderEventKey  = "Outbox-Event-Key"
)

// SecretPrefix starts every secret: "whsec_" and then the key, base64
// encoded (standard alphabet, padded or not).
const SecretPrefix = "whsec_"

// Bounds of a secret's key, in bytes, as Standard Webhooks recommends.
const (
	MinSecretBytes = 24
	MaxSecretBytes = 64
)

// NewSecret returns a new random secret of 32 bytes, in the whsec_ form
// that Config.Secrets and Verifier.Secrets take.
func NewSecret() (string, error) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return "", fmt.Errorf("webhook: new secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key[:]), nil
}

// errSecretForm is why a secret is refused, without the secret.
var errSecretForm = errors.New(`must be "whsec_" followed by the key in base64`)

// parseSecret returns the key of a whsec_ secret. Its errors never hold
// the secret.
func parseSecret(secret string) ([]byte, error) {
	encoded, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, errSecretForm
	}
	key, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(encoded)
	}
	if err != nil {
		return nil, errSecretForm
	}
	if len(key) < MinSecretBytes || len(key) > MaxSecretBytes {
		return nil, fmt.Errorf("the key is %d bytes, must be %d to %d", len(key), MinSecretBytes, MaxSecretBytes)
	}
	return key, nil
}

// signature is the v1 signature of id, timestamp and body under key,
// without the "v1," in front.
func signature(key []byte, id string, timestamp int64, body []byte) []byte {
	mac := hmac.New(sha256.New, key)
	writeSigned(mac, id, timestamp, body)
	return mac.Sum(nil)
}

// writeSigned writes what is signed, "id.timestamp.body", to mac.
func writeSigned(mac hash.Hash, id string, timestamp int64, body []byte) {
	var ts [20]byte
	_, _ = io.WriteString(mac, id)
	_, _ = mac.Write([]byte{'.'})
	_, _ = mac.Write(strconv.AppendInt(ts[:0], timestamp, 10))
	_, _ = mac.Write([]byte{'.'})
	_, _ = mac.Write(body)
}

// signer signs with a list of keys. It is safe for concurrent use: each
// key's HMAC state is pooled, so that a signature costs no allocation of
// a hash.
type signer struct {
	keys  [][]byte
	pools []sync.Pool // of hash.Hash, one pool per key
}

func newSigner(keys [][]byte) *signer {
	s := &signer{keys: keys, pools: make([]sync.Pool, len(keys))}
	for i, key := range keys {
		s.pools[i].New = func() any { return hmac.New(sha256.New, key) }
	}
	return s
}

func (s *signer) count() int { return len(s.keys) }

// signatures is the value of HeaderSignature: a v1 signature for each
// key, space-separated.
func (s *signer) signatures(id string, timestamp int64, body []byte) string {
	enc := base64.StdEncoding
	const sigLen = 44 // enc.EncodedLen(sha256.Size)
	out := make([]byte, 0, len(s.keys)*(4+sigLen))
	var sum [sha256.Size]byte
	for i := range s.keys {
		if i > 0 {
			out = append(out, ' ')
		}
		mac := s.pools[i].Get().(hash.Hash)
		mac.Reset()
		writeSigned(mac, id, timestamp, body)
		mac.Sum(sum[:0])
		s.pools[i].Put(mac)
		out = append(out, "v1,"...)
		out = enc.AppendEncode(out, sum[:])
	}
	return string(out)
}

// Format keeps the keys of a signer out of any output; only a Sink
// holds one, and it prints without its fields, so this is a second line.
func (s *signer) Format(f fmt.State, verb rune) {
	secretfmt.Format(f, verb, fmt.Sprintf("webhook.signer{%d×%s}", len(s.keys), secretfmt.Mark))
}
