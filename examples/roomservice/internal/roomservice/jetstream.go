package roomservice

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	if strings.ContainsAny(c.Stream, " \t.*>/\\") || strings.ContainsFunc(c.Stream, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		errs = append(errs, fmt.Errorf("config: %s.stream %q: must be a stream name (no spaces, control characters, '.', '*', '>', '/' or '\\')", block, c.Stream))
	}
	// natsjs.New checks the prefix, with nothing to connect to.
	if _, err := natsjs.New(natsjs.Config{JetStream: noJetStream{}, Prefix: c.SubjectPrefix}); err != nil {
		errs = append(errs, fmt.Errorf("config: %s.subject_prefix: %w", block, err))
	}
	if c.Duplicates < 0 || c.StartupTimeout < 0 {
		errs = append(errs, fmt.Errorf("config: %s.duplicates %v, startup_timeout %v: must not be negative", block, c.Duplicates, c.StartupTimeout))
	}
	return errors.Join(errs...)
}

// noJetStream stands in for a connection when only a sink's
// configuration is checked; it is never called.
type noJetStream struct{ jetstream.JetStream }

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
	nc, err := nats.Connect(c.URL, nats.Name("room-service "+a.cfg.NodeID), nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true), nats.ReconnectWait(time.Second))
	if err != nil {
		return nil, nil, svckit.NATSErr(c.URL, "connect", err)
	}
	sink, err := a.streamSink(ctx, c, nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return sink, nc, nil
}

func (a *App) streamSink(ctx context.Context, c JetStreamConfig, nc *nats.Conn) (*natsjs.Sink, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, svckit.NATSErr(c.URL, "jetstream", err)
	}
	err = svckit.WaitFor(ctx, c.StartupTimeout, func(ctx context.Context) error {
		_, err := js.Stream(ctx, c.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = js.CreateStream(ctx, natsjs.StreamConfig(c.Stream, c.SubjectPrefix, c.Duplicates))
			if err == nil {
				a.log.InfoContext(ctx, "nats: stream created", slog.String("stream", c.Stream), slog.String("subjects", c.SubjectPrefix+".>"))
			}
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil // another instance created it
			}
		}
		return err
	})
	if err != nil {
		return nil, svckit.NATSErr(c.URL, fmt.Sprintf("stream %q not available within %v", c.Stream, c.StartupTimeout), err)
	}
	return natsjs.New(natsjs.Config{JetStream: js, Prefix: c.SubjectPrefix, ExpectStream: c.Stream, Logger: a.log})
}
