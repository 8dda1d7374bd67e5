package tencentim_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
)

func TestConfigValidation(t *testing.T) {
	valid := tencentim.Config{BaseURL: "https://console.tim.qq.com", SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin}
	_, err := tencentim.New(valid)
	require.NoError(t, err)

	cases := []struct {
		name string
		mod  func(*tencentim.Config)
		want string
	}{
		{"missing base URL", func(c *tencentim.Config) { c.BaseURL = "" }, "BaseURL: required"},
		{"base URL without scheme", func(c *tencentim.Config) { c.BaseURL = "console.tim.qq.com" }, `BaseURL "console.tim.qq.com"`},
		{"base URL with query", func(c *tencentim.Config) { c.BaseURL = "https://x.example?a=b" }, "BaseURL"},
		{"ftp base URL", func(c *tencentim.Config) { c.BaseURL = "ftp://x.example" }, "BaseURL"},
		{"zero app ID", func(c *tencentim.Config) { c.SDKAppID = 0 }, "SDKAppID 0"},
		{"negative app ID", func(c *tencentim.Config) { c.SDKAppID = -5 }, "SDKAppID -5"},
		{"missing secret", func(c *tencentim.Config) { c.SecretKey = "" }, "SecretKey: required"},
		{"missing admin", func(c *tencentim.Config) { c.AdminIdentifier = "" }, "AdminIdentifier: required"},
		{"admin too long", func(c *tencentim.Config) { c.AdminIdentifier = strings.Repeat("a", 33) }, "AdminIdentifier"},
		{"admin not ASCII", func(c *tencentim.Config) { c.AdminIdentifier = "管理员" }, "AdminIdentifier"},
		{"unknown mode", func(c *tencentim.Config) { c.Mode = "broadcast" }, `Mode "broadcast"`},
		{"unknown priority", func(c *tencentim.Config) { c.Priority = "Urgent" }, `Priority "Urgent"`},
		{"priority on notifications", func(c *tencentim.Config) {
			c.Mode, c.Priority = tencentim.ModeSystemNotification, tencentim.PriorityHigh
		}, `Priority "High": system notifications have no priority`},
		{"short signature lifetime", func(c *tencentim.Config) { c.UserSigTTL = time.Second }, "UserSigTTL 1s"},
	}
	for _, tc := range cases {
		cfg := valid
		tc.mod(&cfg)
		_, err := tencentim.New(cfg)
		require.ErrorContains(t, err, "tencentim: "+tc.want, tc.name)
		require.NotContains(t, err.Error(), secret, tc.name)
	}

	// A config that ends up in a log line or an error keeps its secret.
	for _, s := range []string{valid.String(), fmt.Sprintf("%v|%+v|%#v", valid, valid, valid)} {
		require.NotContains(t, s, secret)
		require.Contains(t, s, "[redacted]")
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "cfg", valid)
	require.NotContains(t, buf.String(), secret)
}

// TestNoSecretInAnyErrorOrLog drives every error path and checks that
// neither the secret key nor any UserSig the fake saw reaches an error
// text or a log line.
func TestNoSecretInAnyErrorOrLog(t *testing.T) {
	f := newFake(t)
	var logs outboxtest.LogBuffer
	s := newSink(t, f, func(c *tencentim.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	m := roomMsg("evt-s", "room-1", "RoomUserJoined")
	publish := func(ctx context.Context, msg outbox.Message) string {
		err := s.Publish(ctx, msg)
		require.Error(t, err)
		return err.Error()
	}
	var errs []string

	f.FailNext(2, 70001, "expired: "+tencentimtest.EchoUserSig) // renewal path, echoing the signature
	errs = append(errs, publish(context.Background(), m))
	for _, code := range []int{10010, 10002, 70009, 80001} {
		f.FailNext(1, code, "upstream says usersig="+tencentimtest.EchoUserSig+" key="+secret)
		errs = append(errs, publish(context.Background(), m))
	}
	f.FailNext(1, 10002, "retry; previous request had usersig=eAEAstaleSignatureFromAnEarlierCall0123456789")
	errs = append(errs, publish(context.Background(), m))
	f.FailNextHTTP(1, http.StatusBadGateway)
	errs = append(errs, publish(context.Background(), m))
	f.MalformNext(1)
	errs = append(errs, publish(context.Background(), m))
	hung := publishHung(t, f, s, m)
	require.Error(t, hung)
	errs = append(errs, hung.Error())
	errs = append(errs, publish(context.Background(), outbox.Message{ID: "big", Key: "r", Type: "T", Payload: bytes.Repeat([]byte("x"), 20<<10)}))
	errs = append(errs, publish(context.Background(), outbox.Message{ID: "nogroup", Type: "T"}))

	sigs := map[string]bool{}
	for _, r := range f.Requests() {
		sigs[r.Query["usersig"]] = true
	}
	f.Close() // connection refused: the transport error carries net/http's URL
	errs = append(errs, publish(context.Background(), m))

	require.NotEmpty(t, sigs)
	for _, text := range append(errs, logs.String()) {
		require.NotContains(t, text, secret)
		require.NotRegexp(t, `usersig=[^\[]`, text, "nothing but [redacted] after usersig=")
		require.NotContains(t, text, "sdkappid=", "no request URL or query")
		require.NotContains(t, text, "/v4/", "no request URL")
		for sig := range sigs {
			// Any 16 characters of a signature are a leak, not only all of it.
			for i := 0; i+16 <= len(sig); i += 4 {
				require.NotContains(t, text, sig[i:i+16], "part of a UserSig")
			}
		}
	}
	t.Logf("checked %d error texts and %d bytes of logs against %d signatures", len(errs), len(logs.String()), len(sigs))
}

// TestNoSecretInAnyFormattedValue fails calls in every way, then formats
// every exported value that holds the key or a UserSig (the config, the
// sink, the fake's config, server and records, each error returned and
// every error reachable from it through Unwrap) with every fmt verb and
// both slog handlers, and checks that none shows the key, a UserSig, the
// HMAC inside one, or any 16 characters of them.
func TestNoSecretInAnyFormattedValue(t *testing.T) {
	fakeCfg := tencentimtest.Config{SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin}
	f := tencentimtest.NewServer(fakeCfg)
	t.Cleanup(f.Close)
	cfg := tencentim.Config{
		BaseURL: f.URL(), SDKAppID: appID, SecretKey: secret, AdminIdentifier: admin,
		RateLimit: -1, GroupRateLimit: -1, Logger: outboxtest.Logger(t),
	}
	s, err := tencentim.New(cfg)
	require.NoError(t, err)
	m := roomMsg("evt-fmt", "room-1", "RoomUserJoined")
	require.NoError(t, s.Publish(context.Background(), m)) // the sink holds a UserSig now

	errs := failEveryWay(t, f, s, m)
	secrets := secretsSeen(t, f)
	values := map[string]any{
		"Config": cfg, "*Config": &cfg, "*Sink": s, "Sink": *s,
		"tencentimtest.Config": fakeCfg, "*tencentimtest.Server": f,
		"[]tencentimtest.Request": f.Requests(), "[]tencentimtest.Message": f.AllMessages(),
	}
	closed := newSink(t, f, nil)
	f.Close()
	err = closed.Publish(context.Background(), m)
	require.Error(t, err, "connection refused")
	errs = append(errs, err)
	for i, err := range errs {
		walk(err, func(e error) { values[fmt.Sprintf("error %d: %T %p", i, e, e)] = e })
	}
	for name, v := range values {
		for how, text := range formats(v) {
			requireNoSecret(t, text, name+" "+how, secrets...)
		}
	}
	t.Logf("checked %d values, %d errors, against the key and %d UserSigs", len(values), len(errs), (len(secrets)-1)/2)
}

// failEveryWay makes s fail to publish m in every way but a closed port
// (HTTP 500, a body that is not JSON, each of echoCases, 70001 and a
// re-sign, a timeout, a transport that quotes the URL) and returns the
// errors.
func failEveryWay(t *testing.T, f *tencentimtest.Server, s *tencentim.Sink, m outbox.Message) []error {
	t.Helper()
	var errs []error
	publish := func(ctx context.Context, s *tencentim.Sink) {
		t.Helper()
		err := s.Publish(ctx, m)
		require.Error(t, err)
		errs = append(errs, err)
	}
	f.FailNextHTTP(1, http.StatusInternalServerError)
	publish(context.Background(), s)
	f.MalformNext(1)
	publish(context.Background(), s)
	for _, tc := range echoCases {
		f.FailNextWith(1, 10002, tc.info)
		publish(context.Background(), s)
	}
	f.FailNextWith(2, 70001, func(sig string) string { return "usersig " + sig + " expired" })
	publish(context.Background(), s)
	err := publishHung(t, f, s, m)
	require.Error(t, err)
	errs = append(errs, err)
	publish(context.Background(), newSink(t, f, func(c *tencentim.Config) { c.HTTPClient = &http.Client{Transport: leakyTransport{}} }))

	resigned := 0
	for _, r := range f.Requests() {
		if r.ErrorCode == 70001 {
			resigned++
		}
	}
	require.Equal(t, 2, resigned, "refused, re-signed and refused again")
	return errs
}

// secretsSeen returns the key, every UserSig the fake saw and the HMAC
// inside each.
func secretsSeen(t *testing.T, f *tencentimtest.Server) []string {
	t.Helper()
	secrets := []string{secret}
	for _, r := range f.Requests() {
		if sig := r.Query["usersig"]; !slices.Contains(secrets, sig) {
			secrets = append(secrets, sig, hmacOf(sig))
		}
	}
	require.GreaterOrEqual(t, len(secrets), 3, "the key and a UserSig")
	return secrets
}
