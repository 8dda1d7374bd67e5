package roomservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

// JetStreamConfig is a NATS JetStream destination of room-service's
// events: the servers, the stream and its subjects. The nats block (the
// relay beside the sink) and the sink block's natsjs sub-block are each
// one. It prints (every fmt verb) and logs with the URL's credentials
// redacted.
type JetStreamConfig struct {
	// URL is the NATS server, or several separated by commas, e.g.
	// "nats://nats:4222". It may hold credentials (user:password@ or
	// token@), so give it in the environment (NATS_URL for the nats
	// block, SINK_NATS_URL for sink.natsjs) or the file its _FILE
	// variable names; the environment wins. It is never printed with
	// them.
	URL string `yaml:"url"`
	// Stream is the JetStream stream the events go to. Defaults to
	// "ROOMS". Start-up creates it, with subjects SubjectPrefix.> and the
	// Duplicates window, when it does not exist; an existing stream is
	// the operator's and is left as it is.
	Stream string `yaml:"stream"`
	// SubjectPrefix starts every subject: an event goes to
	// <prefix>.<event_type>.<room_id> (sink/natsjs's default mapping).
	// Defaults to "rooms".
	SubjectPrefix string `yaml:"subject_prefix"`
	// Duplicates is the duplicate window of a stream start-up creates:
	// a redelivery (a worker that died between the stream's
	// acknowledgement and recording it) within it is discarded by event
	// ID. Defaults to 10m.
	Duplicates time.Duration `yaml:"duplicates"`
	// StartupTimeout is how long start-up waits for NATS and the stream.
	// Defaults to 1m.
	StartupTimeout time.Duration `yaml:"startup_timeout"`
}

// The defaults of a JetStream destination.
const (
	DefaultNATSStream         = "ROOMS"
	DefaultNATSSubjectPrefix  = "rooms"
	DefaultNATSDuplicates     = 10 * time.Minute
	DefaultNATSStartupTimeout = time.Minute
)

func (c JetStreamConfig) withDefaults() JetStreamConfig {
	svckit.OrDefault(&c.Stream, DefaultNATSStream)
	svckit.OrDefault(&c.SubjectPrefix, DefaultNATSSubjectPrefix)
	svckit.OrDefault(&c.Duplicates, DefaultNATSDuplicates)
	svckit.OrDefault(&c.StartupTimeout, DefaultNATSStartupTimeout)
	return c
}

// validate checks a destination with its URL set; errors name the key
// under block ("nats", "sink.natsjs").
func (c JetStreamConfig) validate(block string) error {
	var errs []error
	if _, err := svckit.NATSURLs(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("config: %s.url: %w", block, err))
	}
	errs = append(errs, c.stream().Validate(block))
	if c.Duplicates < 0 || c.StartupTimeout < 0 {
		errs = append(errs, fmt.Errorf("config: %s.duplicates %v, startup_timeout %v: must not be negative", block, c.Duplicates, c.StartupTimeout))
	}
	return errors.Join(errs...)
}

// stream is the destination's stream.
func (c JetStreamConfig) stream() svckit.Stream {
	return svckit.Stream{Name: c.Stream, SubjectPrefix: c.SubjectPrefix, Duplicates: c.Duplicates}
}

// String prints the destination with the URL's credentials redacted.
func (c JetStreamConfig) String() string {
	type plain JetStreamConfig
	c.URL = svckit.RedactNATSURL(c.URL)
	return fmt.Sprintf("%+v", plain(c))
}

// Format makes every verb print String; LogValue makes slog log it.
func (c JetStreamConfig) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }
func (c JetStreamConfig) LogValue() slog.Value       { return slog.StringValue(c.String()) }

// jetStreamSink connects to c's servers (reconnecting for ever once
// connected), waits up to c.StartupTimeout for JetStream and makes sure
// the stream exists, and returns a natsjs sink that publishes into it
// and the connection, which the caller closes.
func (a *App) jetStreamSink(ctx context.Context, c JetStreamConfig) (*natsjs.Sink, *nats.Conn, error) {
	j, err := svckit.ConnectJetStream(c.URL, "room-service "+a.cfg.NodeID, c.StartupTimeout)
	if err != nil {
		return nil, nil, err
	}
	sink, err := j.Sink(ctx, c.stream(), a.log)
	if err != nil {
		j.Conn.Close()
		return nil, nil, err
	}
	return sink, j.Conn, nil
}
