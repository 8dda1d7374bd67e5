package webhook

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// Config and Sink print (every fmt verb) and log (slog.LogValuer)
// without the secrets, the Headers' values, or the URL's path, query and
// user information: each implements fmt.Formatter, so no verb reaches
// the fields.

// String describes the config: the URL's endpoint (scheme and host),
// how many secrets, the Headers' names, the networks allowed.
func (c Config) String() string {
	return "webhook.Config{" + describe(c.URL, c.URLFor != nil, len(c.Secrets), c.Headers, c) + "}"
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Format prints String for every verb (%x hex-encodes it, %q quotes it).
func (c Config) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, c.String()) }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON encodes String, so that a config dumped by a debug
// endpoint or a config printer keeps its secrets. There is no matching
// UnmarshalJSON.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// String describes the sink as Config.String does. Sink and *Sink print
// the same.
func (s Sink) String() string {
	raw := ""
	if s.target != nil {
		raw = s.target.String()
	}
	names := make(map[string]string, len(s.static))
	for name := range s.static {
		names[name] = ""
	}
	return "webhook.Sink{" + describe(raw, s.target == nil, s.signer.count(), names, s.cfg) + "}"
}

// GoString is String, for %#v.
func (s Sink) GoString() string { return s.String() }

// Format prints String for every verb.
func (s Sink) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, s.String()) }

// LogValue is String, for slog.
func (s Sink) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes String.
func (s Sink) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

func describe(rawURL string, urlFor bool, secrets int, headers map[string]string, c Config) string {
	var parts []string
	if urlFor {
		parts = append(parts, "URLFor:func")
	} else {
		parts = append(parts, fmt.Sprintf("URL:%q", endpoint(rawURL)+"/"+secretfmt.Mark))
	}
	parts = append(parts, fmt.Sprintf("Secrets:%d×%s", secrets, secretfmt.Mark))
	if len(headers) > 0 {
		names := make([]string, 0, len(headers))
		for name := range headers {
			names = append(names, name)
		}
		slices.Sort(names)
		parts = append(parts, fmt.Sprintf("Headers:%q=%s", names, secretfmt.Mark))
	}
	if len(c.AllowNetworks) > 0 {
		parts = append(parts, fmt.Sprintf("AllowNetworks:%v", c.AllowNetworks))
	}
	if c.MaxRedirects > 0 {
		parts = append(parts, fmt.Sprintf("MaxRedirects:%d", c.MaxRedirects))
	}
	return strings.Join(parts, " ")
}
