package tencentimtest

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"

	"github.com/outboxrelay/outboxrelay/internal/secretfmt"
)

// Config, Server, Message and Request print (every fmt verb), log (slog)
// and marshal to JSON without the secret key or a UserSig, so that a
// test that logs them keeps them out of its output. The fields hold them
// as before, for tests to read.

// String describes the config with the secret key redacted.
func (c Config) String() string {
	return fmt.Sprintf("tencentimtest.Config{SDKAppID:%d SecretKey:%s AdminIdentifier:%q MaxBodyBytes:%d}",
		c.SDKAppID, secretfmt.Secret(c.SecretKey), c.AdminIdentifier, c.MaxBodyBytes)
}

// GoString is String, for %#v.
func (c Config) GoString() string { return c.String() }

// Format prints String for every verb.
func (c Config) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, c.String()) }

// LogValue is String, for slog.
func (c Config) LogValue() slog.Value { return slog.StringValue(c.String()) }

// MarshalJSON encodes the config with the secret key redacted.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config
	p := plain(c)
	p.SecretKey = secretfmt.Secret(c.SecretKey)
	return json.Marshal(p)
}

// String describes the server by its URL and app; never its key.
func (s *Server) String() string {
	if s == nil {
		return "<nil>"
	}
	return fmt.Sprintf("tencentimtest.Server{URL:%q SDKAppID:%d AdminIdentifier:%q}", s.srv.URL, s.cfg.SDKAppID, s.cfg.AdminIdentifier)
}

// GoString is String, for %#v.
func (s *Server) GoString() string { return s.String() }

// Format prints String for every verb.
func (s *Server) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, s.String()) }

// LogValue is String, for slog.
func (s *Server) LogValue() slog.Value { return slog.StringValue(s.String()) }

// plainMessage and plainRequest are Message and Request without their
// methods, to print field by field once the UserSig is redacted.
type (
	plainMessage Message
	plainRequest Request
)

func (m Message) redacted() plainMessage {
	p := plainMessage(m)
	p.UserSig = secretfmt.Secret(m.UserSig)
	return p
}

// String prints the message field by field with the UserSig redacted.
func (m Message) String() string { return fmt.Sprintf("tencentimtest.Message%+v", m.redacted()) }

// GoString is String, for %#v.
func (m Message) GoString() string { return m.String() }

// Format prints String for every verb.
func (m Message) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, m.String()) }

// LogValue is String, for slog.
func (m Message) LogValue() slog.Value { return slog.StringValue(m.String()) }

// MarshalJSON encodes the message with the UserSig redacted.
func (m Message) MarshalJSON() ([]byte, error) { return json.Marshal(m.redacted()) }

func (r Request) redacted() plainRequest {
	p := plainRequest(r)
	if sig, ok := r.Query["usersig"]; ok {
		p.Query = maps.Clone(r.Query)
		p.Query["usersig"] = secretfmt.Secret(sig)
	}
	return p
}

// String prints the request field by field with the usersig query
// parameter redacted.
func (r Request) String() string { return fmt.Sprintf("tencentimtest.Request%+v", r.redacted()) }

// GoString is String, for %#v.
func (r Request) GoString() string { return r.String() }

// Format prints String for every verb.
func (r Request) Format(f fmt.State, verb rune) { secretfmt.Format(f, verb, r.String()) }

// LogValue is String, for slog.
func (r Request) LogValue() slog.Value { return slog.StringValue(r.String()) }

// MarshalJSON encodes the request with the usersig query parameter
// redacted.
func (r Request) MarshalJSON() ([]byte, error) { return json.Marshal(r.redacted()) }
