package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/webhook"
)

func validConfig() webhook.Config {
	return webhook.Config{URL: "https://hooks.example.com/in/" + urlToken + "?t=" + urlToken, Secrets: []string{secret},
		Headers: map[string]string{"Authorization": bearer}}
}

// TestConfigValidation: each malformed field is refused by New with an
// error that names it, and never shows a secret.
func TestConfigValidation(t *testing.T) {
	_, err := webhook.New(validConfig())
	require.NoError(t, err)
	cases := []struct {
		name string
		mod  func(*webhook.Config)
		want string
	}{
		{"no URL", func(c *webhook.Config) { c.URL = "" }, "URL: required (or URLFor)"},
		{"URL and URLFor", func(c *webhook.Config) { c.URLFor = func(outbox.Message) (string, error) { return "", nil } }, "set URL or URLFor, not both"},
		{"not http", func(c *webhook.Config) { c.URL = "ftp://hooks.example.com/x" }, `URL "ftp://hooks.example.com": must be an http or https URL`},
		{"no host", func(c *webhook.Config) { c.URL = "https:///x" }, "must have a host"},
		{"user information", func(c *webhook.Config) { c.URL = "https://user:" + urlToken + "@hooks.example.com/x" }, "must not hold user information"},
		{"fragment", func(c *webhook.Config) { c.URL = "https://hooks.example.com/x#frag" }, "must not have a fragment"},
		{"loopback literal", func(c *webhook.Config) { c.URL = "http://127.0.0.1:8080/x" }, "address 127.0.0.1 is loopback"},
		{"metadata service", func(c *webhook.Config) { c.URL = "http://169.254.169.254/latest" }, "address 169.254.169.254 is link-local"},
		{"IPv6 private", func(c *webhook.Config) { c.URL = "http://[fd00::1]/x" }, "address fd00::1 is private"},
		{"no secrets", func(c *webhook.Config) { c.Secrets = nil }, "Secrets: required"},
		{"too many secrets", func(c *webhook.Config) { c.Secrets = make([]string, webhook.MaxSecrets+1) }, "Secrets: 11, at most MaxSecrets (10)"},
		{"secret without prefix", func(c *webhook.Config) { c.Secrets = []string{strings.TrimPrefix(secret, "whsec_")} }, `Secrets[0]: must be "whsec_" followed by the key in base64`},
		{"secret not base64", func(c *webhook.Config) { c.Secrets = []string{"whsec_not*base64*at*all*" + urlToken} }, "Secrets[0]: must be"},
		{"secret too short", func(c *webhook.Config) { c.Secrets = []string{secret, "whsec_c2hvcnQ="} }, "Secrets[1]: the key is 5 bytes, must be 24 to 64"},
		{"header name", func(c *webhook.Config) { c.Headers = map[string]string{"X Bad": "v"} }, `Headers: name "X Bad" has byte 0x20`},
		{"header reserved", func(c *webhook.Config) { c.Headers = map[string]string{"webhook-id": "v"} }, `Headers: "webhook-id" is the sink's own`},
		{"header value", func(c *webhook.Config) { c.Headers = map[string]string{"X-Key": bearer + "\r\nX-Injected: 1"} }, `Headers: the value of "X-Key" has control character 0x0D`},
		{"redirects", func(c *webhook.Config) { c.MaxRedirects = 11 }, "MaxRedirects 11: must be 0 to 10"},
		{"negative redirects", func(c *webhook.Config) { c.MaxRedirects = -1 }, "MaxRedirects -1"},
		{"content type", func(c *webhook.Config) { c.ContentType = "text/plain\n" }, `ContentType "text/plain\n"`},
		{"invalid network", func(c *webhook.Config) { c.AllowNetworks = []netip.Prefix{{}} }, "AllowNetworks[0]"},
	}
	for _, tc := range cases {
		cfg := validConfig()
		tc.mod(&cfg)
		_, err := webhook.New(cfg)
		require.ErrorContains(t, err, tc.want, tc.name)
		require.True(t, strings.HasPrefix(err.Error(), "webhook: "), tc.name)
		for _, s := range []string{secret, bearer, urlToken} {
			require.NotContains(t, err.Error(), s, tc.name)
		}
	}
}

// TestConfigDefaultsAndOverrides: the zero value means the documented
// defaults, which a request shows; set fields win.
func TestConfigDefaultsAndOverrides(t *testing.T) {
	s, err := webhook.New(validConfig())
	require.NoError(t, err)
	req, err := s.Request(t.Context(), outbox.Message{ID: "e-1", Type: "T", Payload: []byte("{}")})
	require.NoError(t, err)
	require.Equal(t, webhook.DefaultContentType, req.Header.Get("Content-Type"))
	require.Equal(t, webhook.DefaultUserAgent, req.Header.Get("User-Agent"))
	_, err = s.Request(t.Context(), outbox.Message{ID: "e-2", Type: "T", Payload: make([]byte, webhook.DefaultMaxPayloadBytes+1)})
	require.ErrorIs(t, err, webhook.ErrUnsendable, "DefaultMaxPayloadBytes")

	at := time.Unix(1700000000, 0)
	s, err = webhook.New(webhook.Config{URL: "https://hooks.example.com", Secrets: []string{secret},
		ContentType: "application/cloudevents+json", UserAgent: "room-service/2", MaxPayloadBytes: -1,
		Now: func() time.Time { return at }})
	require.NoError(t, err)
	req, err = s.Request(t.Context(), outbox.Message{ID: "e-3", Type: "T", Payload: make([]byte, 4<<20)})
	require.NoError(t, err, "a negative MaxPayloadBytes means no bound")
	require.Equal(t, "application/cloudevents+json", req.Header.Get("Content-Type"))
	require.Equal(t, "room-service/2", req.Header.Get("User-Agent"))
	require.Equal(t, "1700000000", req.Header.Get(webhook.HeaderTimestamp))
}

// TestPrintsWithoutSecrets: no fmt verb, slog handler or JSON encoding of
// a Config or a Sink shows a secret, a header's value or the URL's path
// and query.
func TestPrintsWithoutSecrets(t *testing.T) {
	cfg := validConfig()
	s, err := webhook.New(cfg)
	require.NoError(t, err)
	for _, v := range []any{cfg, &cfg, s, *s} {
		var out []string
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%T %[1]v"} {
			out = append(out, fmt.Sprintf(verb, v))
		}
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "v", v)
		slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "v", v)
		js, err := json.Marshal(v)
		require.NoError(t, err, "%T", v)
		out = append(out, buf.String(), string(js))
		for _, text := range out {
			for _, secret := range []string{secret, strings.TrimPrefix(secret, "whsec_"), bearer, urlToken} {
				require.NotContains(t, text, secret, "%T", v)
			}
		}
		require.Contains(t, fmt.Sprint(v), "https://hooks.example.com")
		require.Contains(t, fmt.Sprint(v), "Authorization")
	}
}
