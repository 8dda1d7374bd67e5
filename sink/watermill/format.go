package watermill

import (
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// Config and Sink print (every fmt verb), log (slog.LogValuer) and
// marshal to JSON by their plain fields only: never the publisher
// (whose configuration may hold the broker's URL with its password),
// nor the Redact texts.

// String describes the config without the publisher's state or the
// Redact texts.
func (c Config) String() string {
	return fmt.Sprintf("watermill.Config{Publisher:%s ClosePublisher:%t Topic:%q TopicFor:%t Classify:%t Check:%t MaxInFlight:%d CloseTimeout:%v Redact:%d texts}",
		publisherType(c), c.ClosePublisher, c.Topic, c.TopicFor != nil, c.Classify != nil, c.Check != nil, c.MaxInFlight, c.CloseTimeout, len(c.Redact))
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Format prints String for every verb.
func (c Config) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, c.String()) }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON encodes String, so that a config dumped by a debug
// endpoint keeps its secrets. There is no matching UnmarshalJSON.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }

// publisherType names the publisher's type, or "nil".
func publisherType(c Config) string {
	if c.Publisher == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", c.Publisher)
}

// String describes the sink by its configuration.
func (s *Sink) String() string { return "watermill.Sink{" + s.cfg.String() + "}" }

// GoString is String, for %#v.
func (s *Sink) GoString() string { return s.String() }

// Format prints String for every verb.
func (s *Sink) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, s.String()) }

// LogValue is String, for slog.
func (s *Sink) LogValue() slog.Value { return slog.StringValue(s.String()) }
