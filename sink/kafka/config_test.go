package kafka

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxrelay/outboxrelay/outbox"
)

// valid is a config New accepts; it touches no broker.
func valid() Config { return Config{Seeds: []string{"127.0.0.1:1"}, Topic: "events"} }

func TestConfigDefaults(t *testing.T) {
	c := valid().withDefaults()
	require.Equal(t, DefaultClientID, c.ClientID)
	require.Equal(t, DefaultMaxRecordBytes, c.MaxRecordBytes)
	require.Same(t, slog.Default(), c.Logger)
	require.Empty(t, c.Compression, "franz-go's own default")

	s, err := New(valid())
	require.NoError(t, err)
	defer s.Close()
	require.True(t, s.owned)
	require.Equal(t, time.Duration(0), s.cl.OptValue(kgo.ProducerLinger), "no lingering: no added latency at Concurrency 1")
	require.Equal(t, kgo.AllISRAcks(), s.cl.OptValue(kgo.RequiredAcks))
	require.Equal(t, false, s.cl.OptValue(kgo.DisableIdempotentWrite), "idempotent")
	require.Equal(t, DefaultClientID, s.cl.OptValue(kgo.ClientID))
}

func TestConfigOverrides(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		mod   func(*Config)
		check func(*testing.T, Config, *Sink)
	}{
		{"client ID", func(c *Config) { c.ClientID = "room-service" }, func(t *testing.T, _ Config, s *Sink) {
			require.Equal(t, "room-service", s.cl.OptValue(kgo.ClientID))
		}},
		{"max record bytes", func(c *Config) { c.MaxRecordBytes = 4096 }, func(t *testing.T, _ Config, s *Sink) {
			require.Equal(t, 4096, s.maxRecordBytes)
		}},
		{"compression", func(c *Config) { c.Compression = "zstd" }, func(t *testing.T, c Config, _ *Sink) {
			require.Equal(t, "zstd", c.Compression)
		}},
		{"logger", func(c *Config) { c.Logger = logger }, func(t *testing.T, _ Config, s *Sink) { require.Same(t, logger, s.log) }},
		{"topic function", func(c *Config) {
			c.Topic, c.TopicFor = "", func(m outbox.Message) (string, error) { return "t-" + m.Type, nil }
		}, func(t *testing.T, _ Config, s *Sink) {
			topic, err := s.Topic(outbox.Message{ID: "e", Type: "A"})
			require.NoError(t, err)
			require.Equal(t, "t-A", topic)
		}},
		{"caller's client", func(c *Config) {
			cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.ProducerLinger(0))
			require.NoError(t, err)
			t.Cleanup(cl.Close)
			c.Seeds, c.Client = nil, cl
		}, func(t *testing.T, c Config, s *Sink) {
			require.False(t, s.owned)
			require.Same(t, c.Client, s.cl)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			s, err := New(c)
			require.NoError(t, err)
			defer s.Close()
			tc.check(t, c.withDefaults(), s)
		})
	}
}

func TestConfigValidation(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	defer cl.Close()
	txn, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.TransactionalID("tx-1"))
	require.NoError(t, err)
	defer txn.Close()
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"no seeds", func(c *Config) { c.Seeds = nil }, "kafka: Seeds: required unless Client is set"},
		{"a URL for a seed", func(c *Config) { c.Seeds = []string{"kafka://u:p@b:9092"} }, `kafka: Seeds "kafka://u:p@b:9092"`},
		{"client and seeds", func(c *Config) { c.Client = cl }, "kafka: Seeds: must be empty when Client is set"},
		{"client and SASL", func(c *Config) {
			c.Seeds, c.Client, c.SASL = nil, cl, SASL{Mechanism: SASLPlain, Username: "u", Password: "p"}
		}, "kafka: SASL: must be empty when Client is set"},
		{"transactional client", func(c *Config) { c.Seeds, c.Client = nil, txn }, `kafka: Client: transactional (TransactionalID "tx-1")`},
		{"no topic", func(c *Config) { c.Topic = "" }, "kafka: Topic: required unless TopicFor is set"},
		{"bad topic", func(c *Config) { c.Topic = "room events" }, `kafka: Topic "room events": has ' ' at byte 4`},
		{"long topic", func(c *Config) { c.Topic = string(make([]byte, 250)) }, "over MaxTopicBytes (249)"},
		{"dot topic", func(c *Config) { c.Topic = ".." }, `kafka: Topic "..": is not a valid topic name`},
		{"compression", func(c *Config) { c.Compression = "brotli" }, `kafka: Compression "brotli": must be`},
		{"small records", func(c *Config) { c.MaxRecordBytes = 100 }, "kafka: MaxRecordBytes 100: must be between 1024"},
		{"negative records", func(c *Config) { c.MaxRecordBytes = -1 }, "kafka: MaxRecordBytes -1"},
		{"cert without key", func(c *Config) { c.TLS.CertFile = "c.pem" }, `kafka: TLS.CertFile "c.pem", TLS.KeyFile "": both or neither`},
		{"TLS config and files", func(c *Config) { c.TLS = TLS{Config: &tls.Config{}, CAFile: "ca.pem"} }, "kafka: TLS.Config: the file and name fields must be empty"},
		{"missing CA file", func(c *Config) { c.TLS.CAFile = "/nonexistent/ca.pem" }, `kafka: TLS.CAFile "/nonexistent/ca.pem"`},
		{"unknown mechanism", func(c *Config) { c.SASL = SASL{Mechanism: "GSSAPI", Username: "u", Password: "p"} }, `kafka: SASL.Mechanism "GSSAPI": must be PLAIN`},
		{"password without mechanism", func(c *Config) { c.SASL = SASL{Username: "u", Password: "p"} }, "kafka: SASL.Mechanism: required with a username or password"},
		{"mechanism without password", func(c *Config) { c.SASL = SASL{Mechanism: SASLScramSHA512, Username: "u"} }, `kafka: SASL.Username "u", SASL.Password (empty): both required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			_, err := New(c)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestSecretsStayOut: the password shows in no fmt verb, slog handler or
// JSON encoding of the config, its SASL block or the sink, nor in a
// validation error.
func TestSecretsStayOut(t *testing.T) {
	const password = "pw-Zq9s3cr3t"
	c := valid()
	c.SASL = SASL{Mechanism: SASLScramSHA256, Username: "svc", Password: password}
	s, err := New(c)
	require.NoError(t, err)
	defer s.Close()
	for _, v := range []any{c, &c, c.SASL, &c.SASL, c.SASL.Password, s} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
			out := fmt.Sprintf(verb, v)
			require.NotContains(t, out, password, "%s of %T", verb, v)
			require.NotContains(t, out, fmt.Sprintf("%x", password), "%s of %T", verb, v)
		}
		b, err := json.Marshal(v)
		if err == nil {
			require.NotContains(t, string(b), password, "JSON of %T", v)
		}
		var text, js bytes.Buffer
		slog.New(slog.NewTextHandler(&text, nil)).Info("x", "v", v)
		slog.New(slog.NewJSONHandler(&js, nil)).Info("x", "v", v)
		require.NotContains(t, text.String(), password, "slog text of %T", v)
		require.NotContains(t, js.String(), password, "slog JSON of %T", v)
	}
	y, err := c.SASL.Password.MarshalYAML()
	require.NoError(t, err)
	require.Equal(t, "[redacted]", y)

	bad := c
	bad.SASL.Mechanism = "GSSAPI"
	_, err = New(bad)
	require.Error(t, err)
	require.NotContains(t, err.Error(), password)
	bad.SASL.Mechanism, bad.SASL.Username = SASLPlain, ""
	_, err = New(bad)
	require.ErrorContains(t, err, "[redacted]")
	require.NotContains(t, err.Error(), password)
}
