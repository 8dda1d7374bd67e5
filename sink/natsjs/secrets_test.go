package natsjs_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/sink/natsjs"
	"github.com/outboxrelay/outboxrelay/sink/natsjs/internal/natstest"
	"github.com/outboxrelay/outboxrelay/sink/sinktest"
)

// requireNoSecret checks err and everything it wraps.
func requireNoSecret(t *testing.T, err error, secret string) {
	t.Helper()
	for i, e := range sinktest.Chain(err) {
		require.NotContains(t, e.Error(), secret, "error %d in the chain (%T)", i, e)
		require.NotContains(t, fmt.Sprintf("%+v", e), secret, "error %d in the chain (%T)", i, e)
	}
}

// TestSecretsStayOut: neither the configuration, nor the sink, nor any
// error Publish returns (or wraps) shows the connection's credentials,
// however they were given, while errors.Is still finds the causes.
func TestSecretsStayOut(t *testing.T) {
	const password, token = "pw-Zq9s3cr3t", "tok-Zq9s3cr3t"
	usersConf := `jetstream {}
authorization { users = [ {user: admin, password: "` + password + `"} ] }`
	tokenConf := `jetstream {}
authorization { token: "` + token + `" }`
	cases := []struct {
		name, secret, conf string
		url                func(addr string) string
		opts               []nats.Option
	}{
		{name: "user and password in the URL", secret: password, conf: usersConf, url: func(a string) string { return "nats://admin:" + password + "@" + a }},
		{name: "nats.UserInfo", secret: password, conf: usersConf, url: func(a string) string { return "nats://" + a }, opts: []nats.Option{nats.UserInfo("admin", password)}},
		{name: "token in the URL", secret: token, conf: tokenConf, url: func(a string) string { return "nats://" + token + "@" + a }},
		{name: "nats.Token", secret: token, conf: tokenConf, url: func(a string) string { return "nats://" + a }, opts: []nats.Option{nats.Token(token)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.StartNATSServer(t, tc.conf)
			url := tc.url(srv.Addr)
			nc, err := nats.Connect(url, append(tc.opts, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond),
				nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...)
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc)
			require.NoError(t, err)
			_, err = js.CreateStream(context.Background(), natsjs.StreamConfig("SECRET", "secret", time.Minute))
			require.NoError(t, err)
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			cfg := natsjs.Config{JetStream: js, Prefix: "secret", Logger: logger}
			sink := newSink(t, cfg)

			for _, v := range []any{cfg, &cfg, sink, *sink} {
				for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
					require.NotContains(t, fmt.Sprintf(verb, v), tc.secret, "%s of %T", verb, v)
				}
			}
			var text, js2 bytes.Buffer
			slog.New(slog.NewTextHandler(&text, nil)).Info("sink", "config", cfg, "cfgp", &cfg, "sink", sink)
			slog.New(slog.NewJSONHandler(&js2, nil)).Info("sink", "config", cfg, "cfgp", &cfg, "sink", sink)
			require.NotContains(t, text.String(), tc.secret)
			require.NotContains(t, js2.String(), tc.secret)

			ctx := context.Background()
			// A mapping whose error carries a URL with the credential, and
			// wraps a sentinel the caller tests for.
			leaky := newSink(t, natsjs.Config{JetStream: js, Logger: logger, Subject: func(outbox.Message) (string, error) {
				return "", fmt.Errorf("no route via %s: %w", url, errUnroutable)
			}})
			err = leaky.Publish(ctx, message("e-1", "room-1"))
			require.Error(t, err)
			require.ErrorIs(t, err, errUnroutable, "errors.Is still finds the cause")
			requireNoSecret(t, err, tc.secret)

			// Out of time: no stream answers in time.
			pctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			err = sink.Publish(pctx, message("e-2", "room-1"))
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			requireNoSecret(t, err, tc.secret)

			// A header value may hold a credential of its own; an error
			// about it names the header, never the value.
			bad := message("e-3", "room-1")
			bad.Headers["Authorization"] = "Bearer " + tc.secret + "\n"
			err = sink.Publish(ctx, bad)
			require.Error(t, err)
			requireNoSecret(t, err, tc.secret)

			// The server goes away: reconnecting, then timing out.
			srv.Stop()
			pctx, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
			err = sink.Publish(pctx, message("e-4", "room-1"))
			cancel()
			require.Error(t, err)
			require.False(t, outbox.IsPermanent(err), "%v", err)
			requireNoSecret(t, err, tc.secret)
			require.NotContains(t, logs.String(), tc.secret)
		})
	}
}
