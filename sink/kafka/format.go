package kafka

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// Secret is a string that never appears in output: every fmt verb, slog,
// encoding/json and YAML encoders (a MarshalYAML method) show
// "[redacted]", or "(empty)" for the empty string. Convert it with
// string(s) to use it. It decodes from YAML and JSON as a plain string.
type Secret string

// String is "[redacted]", or "(empty)".
func (s Secret) String() string { return secretfmt.Secret(string(s)) }

// GoString is String, for %#v.
func (s Secret) GoString() string { return s.String() }

// Format prints String for every verb.
func (s Secret) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, s.String()) }

// LogValue is String, for slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON encodes String.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// MarshalYAML encodes String (for YAML encoders that look for the
// method, such as go.yaml.in/yaml/v3).
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// Config and Sink print (every fmt verb), log (slog.LogValuer) and
// marshal to JSON without the SASL password, the TLS key or the client's
// state: each implements fmt.Formatter, so no verb reaches the fields.

// String describes the config by its data fields, the password redacted.
func (c Config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kafka.Config{Client:%t Seeds:%q ClientID:%q Topic:%q TopicFor:%t", c.Client != nil, c.Seeds, c.ClientID, c.Topic, c.TopicFor != nil)
	fmt.Fprintf(&b, " TLS:%t SASL:{Mechanism:%q Username:%q Password:%s}", c.TLS.enabled(), c.SASL.Mechanism, c.SASL.Username, c.SASL.Password)
	fmt.Fprintf(&b, " Compression:%q MaxRecordBytes:%d}", c.Compression, c.MaxRecordBytes)
	return b.String()
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Format prints String for every verb.
func (c Config) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, c.String()) }

// LogValue is a group of the fields String shows, for slog.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Bool("client", c.Client != nil),
		slog.Any("seeds", c.Seeds),
		slog.String("client_id", c.ClientID),
		slog.String("topic", c.Topic),
		slog.Bool("topic_for", c.TopicFor != nil),
		slog.Bool("tls", c.TLS.enabled()),
		slog.String("sasl_mechanism", c.SASL.Mechanism),
		slog.String("sasl_username", c.SASL.Username),
		slog.String("sasl_password", c.SASL.Password.String()),
		slog.String("compression", c.Compression),
		slog.Int("max_record_bytes", c.MaxRecordBytes),
	)
}

// configJSON is what a Config marshals to: its data fields, the password
// redacted; the client, functions, TLS config and logger are left out.
type configJSON struct {
	Seeds          []string `json:"seeds,omitempty"`
	ClientID       string   `json:"client_id,omitempty"`
	TLS            tlsJSON  `json:"tls"`
	SASL           SASL     `json:"sasl"`
	Compression    string   `json:"compression,omitempty"`
	Topic          string   `json:"topic,omitempty"`
	MaxRecordBytes int      `json:"max_record_bytes,omitempty"`
}

type tlsJSON struct {
	Enabled    bool   `json:"enabled"`
	CAFile     string `json:"ca_file,omitempty"`
	CertFile   string `json:"cert_file,omitempty"`
	KeyFile    string `json:"key_file,omitempty"`
	ServerName string `json:"server_name,omitempty"`
}

// MarshalJSON encodes the config's data fields with the password
// "[redacted]", so that a config dumped by a debug endpoint keeps its
// secret. There is no matching UnmarshalJSON: decoding JSON into a
// Config sets its fields as usual.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(configJSON{
		Seeds: c.Seeds, ClientID: c.ClientID, SASL: c.SASL, Compression: c.Compression, Topic: c.Topic, MaxRecordBytes: c.MaxRecordBytes,
		TLS: tlsJSON{Enabled: c.TLS.enabled(), CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, ServerName: c.TLS.ServerName},
	})
}

// String describes the sink by its topic and whether it owns its client;
// never its credentials. Sink and *Sink print the same.
func (s *Sink) String() string {
	return fmt.Sprintf("kafka.Sink{Topic:%q TopicFor:%t OwnsClient:%t MaxRecordBytes:%d}", s.topic, s.topicFor != nil, s.owned, s.maxRecordBytes)
}

// GoString is String, for %#v.
func (s *Sink) GoString() string { return s.String() }

// Format prints String for every verb.
func (s *Sink) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, s.String()) }

// LogValue is a group of the fields String shows, for slog.
func (s *Sink) LogValue() slog.Value {
	return slog.GroupValue(slog.String("topic", s.topic), slog.Bool("topic_for", s.topicFor != nil),
		slog.Bool("owns_client", s.owned), slog.Int("max_record_bytes", s.maxRecordBytes))
}
