package webhook_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

// The Standard Webhooks specification's published test vector.
const (
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func vectorHeader(sig string) http.Header {
	h := http.Header{}
	h.Set(webhook.HeaderID, vectorID)
	h.Set(webhook.HeaderTimestamp, "1614265330")
	h.Set(webhook.HeaderSignature, sig)
	return h
}

func atVector() time.Time { return time.Unix(vectorTimestamp, 0) }

// TestSignsTheSpecificationsVector: the sink signs the reference message
// exactly as the specification's test vector says, so that any Standard
// Webhooks library verifies it.
func TestSignsTheSpecificationsVector(t *testing.T) {
	s, err := webhook.New(webhook.Config{URL: "https://hooks.example.com", Secrets: []string{secret}, Now: atVector})
	require.NoError(t, err)
	req, err := s.Request(t.Context(), outbox.Message{ID: vectorID, Type: "T", Payload: []byte(vectorBody)})
	require.NoError(t, err)
	require.Equal(t, vectorSignature, req.Header.Get(webhook.HeaderSignature))
	require.Equal(t, vectorID, req.Header.Get(webhook.HeaderID))
	require.Equal(t, "1614265330", req.Header.Get(webhook.HeaderTimestamp))
	body, err := io.ReadAll(req.Body)
	require.NoError(t, err)
	require.Equal(t, vectorBody, string(body))

	v := webhook.Verifier{Secrets: []string{secret}, Now: atVector}
	require.NoError(t, v.Verify(vectorHeader(vectorSignature), []byte(vectorBody)))
}

// TestSignsWithEverySecretDuringRotation: with two secrets each signs,
// and a receiver that knows either verifies.
func TestSignsWithEverySecretDuringRotation(t *testing.T) {
	s, err := webhook.New(webhook.Config{URL: "https://hooks.example.com", Secrets: []string{secret, otherSecret}, Now: atVector})
	require.NoError(t, err)
	req, err := s.Request(t.Context(), outbox.Message{ID: vectorID, Type: "T", Payload: []byte(vectorBody)})
	require.NoError(t, err)
	sigs := strings.Fields(req.Header.Get(webhook.HeaderSignature))
	require.Len(t, sigs, 2)
	require.Equal(t, vectorSignature, sigs[0])
	for _, known := range []string{secret, otherSecret} {
		require.NoError(t, webhook.Verifier{Secrets: []string{known}, Now: atVector}.Verify(req.Header, []byte(vectorBody)))
	}
}

func TestVerifyRefuses(t *testing.T) {
	v := webhook.Verifier{Secrets: []string{secret}, Now: atVector}
	body := []byte(vectorBody)
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		now    time.Time
		want   error
	}{
		{"a changed body", vectorHeader(vectorSignature), []byte(`{"test": 2432232315}`), atVector(), webhook.ErrSignature},
		{"another secret's signature", vectorHeader("v1,bm90IHRoZSByaWdodCBzaWduYXR1cmUgYXQgYWxsIQ=="), body, atVector(), webhook.ErrSignature},
		{"a scheme it does not know", vectorHeader("v1a," + strings.TrimPrefix(vectorSignature, "v1,")), body, atVector(), webhook.ErrSignature},
		{"a signature that is not base64", vectorHeader("v1,***"), body, atVector(), webhook.ErrSignature},
		{"no signature", vectorHeader(""), body, atVector(), webhook.ErrMissingHeaders},
		{"no ID", func() http.Header { h := vectorHeader(vectorSignature); h.Del(webhook.HeaderID); return h }(), body, atVector(), webhook.ErrMissingHeaders},
		{"a huge signature header", vectorHeader(strings.Repeat("v1,AAAA ", 1000) + vectorSignature), body, atVector(), webhook.ErrMissingHeaders},
		{"a timestamp that is not a number", func() http.Header {
			h := vectorHeader(vectorSignature)
			h.Set(webhook.HeaderTimestamp, "yesterday")
			return h
		}(), body, atVector(), webhook.ErrTimestamp},
		{"an old timestamp (replay)", vectorHeader(vectorSignature), body, atVector().Add(webhook.DefaultTolerance + time.Second), webhook.ErrTimestamp},
		{"a future timestamp", vectorHeader(vectorSignature), body, atVector().Add(-webhook.DefaultTolerance - time.Second), webhook.ErrTimestamp},
	}
	for _, tc := range cases {
		v.Now = func() time.Time { return tc.now }
		require.ErrorIs(t, v.Verify(tc.header, tc.body), tc.want, tc.name)
	}
	// Within the tolerance either way, and among other signatures.
	for _, skew := range []time.Duration{webhook.DefaultTolerance, -webhook.DefaultTolerance} {
		v.Now = func() time.Time { return atVector().Add(skew) }
		require.NoError(t, v.Verify(vectorHeader("v1a,xyz v1,AAAA "+vectorSignature), body))
	}
	v.Tolerance, v.Now = time.Minute, func() time.Time { return atVector().Add(2 * time.Minute) }
	require.ErrorIs(t, v.Verify(vectorHeader(vectorSignature), body), webhook.ErrTimestamp, "Tolerance")
	require.ErrorIs(t, webhook.Verify([]string{secret}, vectorHeader(vectorSignature), body, 0), webhook.ErrTimestamp, "now is far from 2021")

	bad := webhook.Verifier{Secrets: []string{"not-a-secret"}, Now: atVector}
	err := bad.Verify(vectorHeader(vectorSignature), body)
	require.ErrorContains(t, err, "Verifier.Secrets[0]")
	require.NotContains(t, err.Error(), "not-a-secret")
}

func TestNewSecret(t *testing.T) {
	a, err := webhook.NewSecret()
	require.NoError(t, err)
	b, err := webhook.NewSecret()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, webhook.SecretPrefix))
	_, err = webhook.New(webhook.Config{URL: "https://hooks.example.com", Secrets: []string{a, b}})
	require.NoError(t, err)
}

// TestHeaderValueEncoding: IDs, types and keys of any bytes travel in
// headers and come back unchanged; plain ones go as they are.
func TestHeaderValueEncoding(t *testing.T) {
	for _, s := range []string{"", "evt-1", "a b", "100%", "%41", "k\r\nX-Injected: 1\x00", "Zoë 😀", "\xff\xfe", "\u202eevil", strings.Repeat("😀", 255)} {
		enc := webhook.EncodeHeaderValue(s)
		for i := 0; i < len(enc); i++ {
			require.True(t, enc[i] > ' ' && enc[i] < 0x7f, "%q encodes to %q: byte %d is not printable ASCII", s, enc, i)
		}
		dec, err := webhook.DecodeHeaderValue(enc)
		require.NoError(t, err)
		require.Equal(t, s, dec)
	}
	require.Equal(t, "evt-1:a/b", webhook.EncodeHeaderValue("evt-1:a/b"))
	require.Equal(t, "a%20b%25", webhook.EncodeHeaderValue("a b%"))
	_, err := webhook.DecodeHeaderValue("%zz")
	require.Error(t, err)
}
