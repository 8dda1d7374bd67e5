package svckit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/outboxrelay/outboxrelay/sink/natsjs"
)

// JetStream is a service's connection to NATS JetStream. Its errors name
// the server list with the credentials redacted (NATSErr).
type JetStream struct {
	// Conn is the connection, which the service closes (or drains).
	Conn *nats.Conn
	// JS is JetStream on Conn.
	JS jetstream.JetStream
	// url is the server list, for errors; timeout bounds every Wait.
	url     string
	timeout time.Duration
}

// ConnectJetStream connects to the servers of url (reconnecting for ever
// once connected) as name, with opts after the shell's own. Wait waits up
// to startupTimeout.
func ConnectJetStream(url, name string, startupTimeout time.Duration, opts ...nats.Option) (*JetStream, error) {
	opts = append([]nats.Option{nats.Name(name), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(time.Second)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, NATSErr(url, "connect", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, NATSErr(url, "jetstream", err)
	}
	return &JetStream{Conn: nc, JS: js, url: url, timeout: startupTimeout}, nil
}

// Wait calls f every second until it succeeds, or until ctx ends or the
// startup timeout has passed, for a server or a stream (what) that may
// still be coming.
func (j *JetStream) Wait(ctx context.Context, what string, f func(context.Context) error) error {
	if err := WaitFor(ctx, j.timeout, f); err != nil {
		return NATSErr(j.url, fmt.Sprintf("%s not available within %v", what, j.timeout), err)
	}
	return nil
}

// Sink waits for JetStream and makes sure the stream s exists, creating
// it (subjects <prefix>.>, the Duplicates window) when it does not: an
// existing stream is the operator's and is left as it is. It returns a
// natsjs sink that publishes into the stream.
func (j *JetStream) Sink(ctx context.Context, s Stream, log *slog.Logger) (*natsjs.Sink, error) {
	err := j.Wait(ctx, fmt.Sprintf("stream %q", s.Name), func(ctx context.Context) error {
		_, err := j.JS.Stream(ctx, s.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = j.JS.CreateStream(ctx, natsjs.StreamConfig(s.Name, s.SubjectPrefix, s.Duplicates))
			if err == nil {
				log.InfoContext(ctx, "nats: stream created", slog.String("stream", s.Name), slog.String("subjects", s.SubjectPrefix+".>"))
			}
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				err = nil // another instance created it
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return natsjs.New(natsjs.Config{JetStream: j.JS, Prefix: s.SubjectPrefix, ExpectStream: s.Name, Logger: log})
}
