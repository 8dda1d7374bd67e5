package kafka

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/outboxrelay/outboxrelay/internal/optcheck"
	"github.com/outboxrelay/outboxrelay/internal/sinkerr"
	"github.com/outboxrelay/outboxrelay/outbox"
)

// Defaults of Config.
const (
	// DefaultClientID is the client.id the sink's own client sends to
	// the brokers (it shows in their logs, metrics and quotas).
	DefaultClientID = "outboxrelay"
	// DefaultMaxRecordBytes bounds a record as a batch of its own: the
	// 61-byte batch header and the record (key, value, headers). It is
	// Kafka's max.message.bytes default before 3.0 (1000012) and
	// franz-go's batch limit; newer brokers default to 1048588.
	DefaultMaxRecordBytes = 1000012
	// MinMaxRecordBytes is the smallest MaxRecordBytes accepted: a
	// record batch header and a small record.
	MinMaxRecordBytes = 1024
	// MaxTopicBytes is Kafka's limit on the length of a topic name.
	MaxTopicBytes = 249
)

// The SASL mechanisms Config.SASL.Mechanism accepts.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// The codecs Config.Compression accepts.
var compressionCodecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

// Config configures a Sink. Either Client or Seeds is required; Topic or
// TopicFor is required. Every other field has a default, and the zero
// value of each means that default. The fields of plain types carry yaml
// tags, so that a service can decode its own configuration straight into
// a Config; Client, TopicFor, TLS.Config and Logger are for Go callers.
type Config struct {
	// Client is a franz-go client of the caller's to produce with. The
	// sink never closes it. Defaults to nil: the sink makes a client of
	// its own from Seeds, ClientID, TLS, SASL and Compression (which
	// must then be empty when Client is set) and closes it in Close.
	//
	// A client of your own keeps its own settings: build it with
	// kgo.ProducerLinger(0) (franz-go lingers 10ms by default, which
	// every Publish then waits), acks=all and idempotence (franz-go's
	// defaults), a partitioner that hashes keys (franz-go's default),
	// and a ProducerBatchMaxBytes of at least MaxRecordBytes. New logs a
	// warning for a lingering client or one without acks=all, and
	// refuses a transactional one.
	Client *kgo.Client `yaml:"-"`
	// Seeds are the brokers to bootstrap from, host:port each
	// (required unless Client is set).
	Seeds []string `yaml:"seeds"`
	// ClientID is the client.id of the sink's own client. Defaults to
	// DefaultClientID.
	ClientID string `yaml:"client_id"`
	// TLS configures TLS to the brokers. Defaults to plaintext.
	TLS TLS `yaml:"tls"`
	// SASL configures SASL authentication. Defaults to none.
	SASL SASL `yaml:"sasl"`
	// Compression is the codec of the sink's own client: "none", "gzip",
	// "snappy", "lz4" or "zstd". Defaults to "" (franz-go's default:
	// snappy, or none where a batch does not get smaller). Sizes are
	// checked before compression (see MaxRecordBytes).
	Compression string `yaml:"compression"`

	// Topic is the topic every message goes to, unless TopicFor is set.
	// It must be a valid Kafka topic name.
	Topic string `yaml:"topic"`
	// TopicFor, if set, maps a message to its topic instead of Topic.
	// Defaults to nil (always Topic). An error from it, or a name that
	// is not a valid topic, fails the message permanently.
	TopicFor func(outbox.Message) (string, error) `yaml:"-"`

	// MaxRecordBytes bounds a record as a batch of its own, before
	// compression: the 61-byte batch header plus the key, value and
	// headers with their lengths. A larger message fails permanently
	// (ErrUnsendable) before anything is sent, and the sink's own
	// client builds no batch larger than this. Set it to the topic's
	// max.message.bytes (or lower). Defaults to DefaultMaxRecordBytes;
	// at least MinMaxRecordBytes.
	MaxRecordBytes int `yaml:"max_record_bytes"`
	// Logger receives the sink's own lines: reserved headers left out
	// (debug), records that a broker refused in a batch and took alone
	// (info), a client of the caller's that lingers (warning). Defaults
	// to slog.Default().
	Logger *slog.Logger `yaml:"-"`
}

// TLS configures TLS to the brokers for the sink's own client.
type TLS struct {
	// Enabled turns TLS on, with the system's roots unless CAFile is
	// set. Setting any other field turns it on too.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM file of the certificate authorities that sign the
	// brokers' certificates. Defaults to the system's roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key,
	// for brokers that require mutual TLS. Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName overrides the name the brokers' certificates are
	// checked against. Defaults to the host of each broker's address.
	ServerName string `yaml:"server_name"`
	// Config, if set, is used as it is and every other field must be
	// empty: for what the fields above do not cover.
	Config *tls.Config `yaml:"-"`
}

// SASL configures SASL authentication for the sink's own client. For
// mechanisms beyond these three (OAUTHBEARER, AWS_MSK_IAM), build a
// client with franz-go's sasl packages and pass it as Config.Client.
type SASL struct {
	// Mechanism is SASLPlain, SASLScramSHA256, SASLScramSHA512, or ""
	// for no authentication.
	Mechanism string `yaml:"mechanism"`
	// Username and Password are the credentials; both required with a
	// Mechanism. The password never appears in output: see Secret.
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
}

func (t TLS) enabled() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != "" || t.Config != nil
}

// withDefaults returns c with the defaults filled in.
func (c Config) withDefaults() Config {
	if c.Client == nil && c.ClientID == "" {
		c.ClientID = DefaultClientID
	}
	c.MaxRecordBytes = cmp.Or(c.MaxRecordBytes, DefaultMaxRecordBytes)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// validate checks a config with defaults filled in. Messages name the
// field and, except for the password, the value.
func (c Config) validate() error {
	problems := optcheck.New("kafka")
	bad := problems.Addf
	if c.Client != nil {
		own := []string{}
		if len(c.Seeds) > 0 {
			own = append(own, "Seeds")
		}
		if c.ClientID != "" {
			own = append(own, "ClientID")
		}
		if c.TLS.enabled() {
			own = append(own, "TLS")
		}
		if c.SASL != (SASL{}) {
			own = append(own, "SASL")
		}
		if c.Compression != "" {
			own = append(own, "Compression")
		}
		if len(own) > 0 {
			bad("%s: must be empty when Client is set (the client has its own)", strings.Join(own, ", "))
		}
		if id, _ := c.Client.OptValue(kgo.TransactionalID).(string); id != "" {
			bad("Client: transactional (TransactionalID %q); the sink produces outside transactions", id)
		}
	} else {
		if len(c.Seeds) == 0 {
			bad("Seeds: required unless Client is set (host:port of one or more brokers)")
		}
		for _, s := range c.Seeds {
			if s == "" || strings.ContainsAny(s, " \t\r\n/@") {
				bad("Seeds %q: each must be host:port (or host), without scheme, path or user information", s)
			}
		}
	}
	if c.TopicFor == nil {
		if c.Topic == "" {
			bad("Topic: required unless TopicFor is set")
		} else if why := topicFault(c.Topic); why != "" {
			bad("Topic %s: %s", sinkerr.Quote(c.Topic), why)
		}
	}
	if _, ok := compressionCodecs[c.Compression]; c.Compression != "" && !ok {
		bad("Compression %q: must be empty, none, gzip, snappy, lz4 or zstd", c.Compression)
	}
	if c.MaxRecordBytes < MinMaxRecordBytes || c.MaxRecordBytes > 1<<30 {
		bad("MaxRecordBytes %d: must be between %d and %d", c.MaxRecordBytes, MinMaxRecordBytes, 1<<30)
	}
	if c.TLS.Config != nil && (c.TLS.CAFile != "" || c.TLS.CertFile != "" || c.TLS.KeyFile != "" || c.TLS.ServerName != "") {
		bad("TLS.Config: the file and name fields must be empty when Config is set")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		bad("TLS.CertFile %q, TLS.KeyFile %q: both or neither", c.TLS.CertFile, c.TLS.KeyFile)
	}
	switch c.SASL.Mechanism {
	case "":
		if c.SASL.Username != "" || c.SASL.Password != "" {
			bad("SASL.Mechanism: required with a username or password (%s, %s or %s)", SASLPlain, SASLScramSHA256, SASLScramSHA512)
		}
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if c.SASL.Username == "" || c.SASL.Password == "" {
			bad("SASL.Username %q, SASL.Password %s: both required with mechanism %s", c.SASL.Username, c.SASL.Password, c.SASL.Mechanism)
		}
	default:
		bad("SASL.Mechanism %q: must be %s, %s or %s", c.SASL.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
	}
	return problems.Err()
}

// clientOpts are the options of the sink's own client: the producer
// settings that New documents, and the connection settings of c.
func (c Config) clientOpts() ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Seeds...),
		kgo.ClientID(c.ClientID),
		// No lingering: a record goes out as soon as the connection is
		// free, and records that arrive while a request is in flight
		// (the worker's other goroutines) make the next batch. Lingering
		// would delay every Publish at Concurrency 1 and buy nothing.
		kgo.ProducerLinger(0),
		// The defaults, set to say so: every in-sync replica acknowledges
		// (idempotent production, on by default, requires it).
		kgo.RequiredAcks(kgo.AllISRAcks()),
		// No batch over what a record alone may be, so that a topic whose
		// max.message.bytes is MaxRecordBytes never refuses a batch.
		kgo.ProducerBatchMaxBytes(int32(c.MaxRecordBytes)),
	}
	if codec, ok := compressionCodecs[c.Compression]; ok {
		opts = append(opts, kgo.ProducerBatchCompression(codec))
	}
	if c.TLS.enabled() {
		tc, err := c.TLS.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if m := c.SASL.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// config is the tls.Config t describes. Errors name the file, never its
// content.
func (t TLS) config() (*tls.Config, error) {
	if t.Config != nil {
		return t.Config.Clone(), nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafka: TLS.CAFile %q: %w", t.CAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("kafka: TLS.CAFile %q: no PEM certificate in it", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// The error of tls.LoadX509KeyPair names what is wrong with
			// the PEM blocks, never the key's bytes.
			return nil, fmt.Errorf("kafka: TLS.CertFile %q, TLS.KeyFile %q: %w", t.CertFile, t.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func (s SASL) mechanism() sasl.Mechanism {
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.Username, Pass: string(s.Password)}.AsMechanism()
	case SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: string(s.Password)}.AsSha256Mechanism()
	case SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: string(s.Password)}.AsSha512Mechanism()
	}
	return nil
}

// checkCallerClient logs a warning for settings of a caller's client
// that work against the sink: lingering (every Publish waits it) and
// acks other than all (a record the leader alone has can be lost).
func checkCallerClient(cl *kgo.Client, log *slog.Logger) {
	if linger, _ := cl.OptValue(kgo.ProducerLinger).(time.Duration); linger > 0 {
		log.Warn("kafka: the client lingers before each batch, and every Publish waits that long; build it with kgo.ProducerLinger(0)",
			slog.Duration("linger", linger))
	}
	if acks, ok := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); ok && acks != kgo.AllISRAcks() {
		log.Warn("kafka: the client does not wait for every in-sync replica (acks=all); a broker failure can lose published records")
	}
}

// topicFault says why name is not a valid Kafka topic name, or "".
func topicFault(name string) string {
	if why := sinkerr.SizeFault(name, MaxTopicBytes, "MaxTopicBytes"); why != "" {
		return why
	}
	if name == "." || name == ".." {
		return "is not a valid topic name"
	}
	if i := strings.IndexFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return fmt.Sprintf("has %q at byte %d: topic names are ASCII letters, digits, '.', '_' and '-'", r, i)
	}
	return ""
}

// withoutConsumerOpts is opts without the consumer and group options, for
// a second client that only produces.
func withoutConsumerOpts(opts []kgo.Opt) []kgo.Opt {
	return slices.DeleteFunc(slices.Clone(opts), func(o kgo.Opt) bool {
		_, consumer := o.(kgo.ConsumerOpt)
		_, group := o.(kgo.GroupOpt)
		return consumer || group
	})
}
