package tencentim

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// Config and Sink print (every fmt verb), log (slog.LogValuer) and
// marshal to JSON without the secret key, without any cached UserSig and
// without user information of the base URL: each implements
// fmt.Formatter, so no verb reaches the fields.

// String describes the config without the secret key, and with any user
// information, query or fragment of BaseURL redacted.
func (c Config) String() string {
	return fmt.Sprintf("tencentim.Config{BaseURL:%q SDKAppID:%d SecretKey:%s AdminIdentifier:%q Mode:%q}",
		redactURL(c.BaseURL), c.SDKAppID, secretfmt.Secret(c.SecretKey), c.AdminIdentifier, c.Mode)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Format prints String for every verb (%x hex-encodes it, %q quotes it).
func (c Config) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, c.String()) }

// LogValue is a group of the fields String shows, for slog.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", redactURL(c.BaseURL)),
		slog.Int("sdk_app_id", c.SDKAppID),
		slog.String("secret_key", secretfmt.Secret(c.SecretKey)),
		slog.String("admin_identifier", c.AdminIdentifier),
		slog.String("mode", string(c.Mode)),
	)
}

// MarshalJSON encodes the config's data fields with SecretKey
// "[redacted]" (or "(empty)") and BaseURL redacted as in String, so that
// a config dumped by a debug endpoint or a config printer keeps its
// secret. There is no matching UnmarshalJSON: decoding JSON into a Config
// sets its fields as usual.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config // the fields without the methods: no call back here
	p := plain(c)
	p.BaseURL, p.SecretKey = redactURL(c.BaseURL), secretfmt.Secret(c.SecretKey)
	return json.Marshal(p)
}

// String describes the sink by its app, admin and mode; never its key or
// its UserSig. Sink and *Sink print the same.
func (s Sink) String() string {
	return fmt.Sprintf("tencentim.Sink{BaseURL:%q SDKAppID:%d AdminIdentifier:%q Mode:%q}",
		redactURL(s.cfg.BaseURL), s.cfg.SDKAppID, s.cfg.AdminIdentifier, s.cfg.Mode)
}

// GoString is String, for %#v.
func (s Sink) GoString() string { return s.String() }

// Format prints String for every verb (%x hex-encodes it, %q quotes it).
func (s Sink) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, s.String()) }

// LogValue is a group of the fields String shows, for slog.
func (s Sink) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", redactURL(s.cfg.BaseURL)),
		slog.Int("sdk_app_id", s.cfg.SDKAppID),
		slog.String("admin_identifier", s.cfg.AdminIdentifier),
		slog.String("mode", string(s.cfg.Mode)),
	)
}

// Format keeps the key and the UserSigs of a signer out of any output;
// only a Sink holds one, and it prints without its fields, so this is a
// second line.
func (s *signer) Format(f fmt.State, verb rune) {
	secretfmt.Format(f, verb, "tencentim.signer{"+secretfmt.Mark+"}")
}

// LogValue is the redaction mark, for slog.
func (s *signer) LogValue() slog.Value { return slog.StringValue(secretfmt.Mark) }
