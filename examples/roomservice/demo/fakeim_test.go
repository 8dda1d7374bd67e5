package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
)

// TestServeFakeIMForAConfig serves the fake for a config and delivers
// through it with the credentials of that config, as room-service would.
// The config has no DSN: the fake needs no database (in compose, the DSN
// is room-service's alone, from the environment).
func TestServeFakeIMForAConfig(t *testing.T) {
	t.Setenv("TENCENT_IM_SECRET_KEY", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "http:\n  addr: \":8080\"\n"+
		"tencent_im:\n  base_url: \"http://%s\"\n  sdk_app_id: 1400000001\n  admin_identifier: admin\n  secret_key: k1\n", addr), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveFakeIM(ctx, path, io.Discard) }()
	outboxtest.Eventually(t, "the fake listens", func() bool {
		select {
		case err := <-served:
			t.Fatalf("serveFakeIM returned before it was stopped: %v", err)
		default:
		}
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	sink, err := tencentim.New(tencentim.Config{BaseURL: "http://" + addr, SDKAppID: 1400000001, AdminIdentifier: "admin", SecretKey: "k1"})
	require.NoError(t, err)
	require.NoError(t, sink.Publish(context.Background(), outbox.Message{ID: "e1", Key: "room-1", Type: "RoomUserJoined", Payload: []byte(`{}`)}))

	wrong, err := tencentim.New(tencentim.Config{BaseURL: "http://" + addr, SDKAppID: 1400000001, AdminIdentifier: "admin", SecretKey: "other"})
	require.NoError(t, err)
	require.Error(t, wrong.Publish(context.Background(), outbox.Message{ID: "e2", Key: "room-1", Type: "RoomUserJoined", Payload: []byte(`{}`)}),
		"the fake checks the UserSig against the config's secret key")
	cancel()
	require.NoError(t, <-served)
}

func TestServeFakeIMRefusesAConfigItCannotServe(t *testing.T) {
	require.ErrorContains(t, serveFakeIM(context.Background(), "", io.Discard), "-fake-im needs -config")
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("mysql:\n  dsn: \"root@tcp(127.0.0.1:3306)/rooms\"\n"+
		"tencent_im:\n  base_url: \"https://console.tim.qq.com\"\n  sdk_app_id: 1\n  admin_identifier: admin\n  secret_key: k\n"), 0o600))
	require.ErrorContains(t, serveFakeIM(context.Background(), path, io.Discard), `tencent_im.base_url "https://console.tim.qq.com": the fake serves http://HOST:PORT`)
}

// TestServedFakeKeepsFewRecordsAndNoUserSig: the -fake-im server runs for
// as long as compose does, so its fake is bounded and keeps no UserSig.
func TestServedFakeKeepsFewRecordsAndNoUserSig(t *testing.T) {
	im := roomservice.TencentIMConfig{SDKAppID: 1400000001, AdminIdentifier: "admin", SecretKey: "k1"}
	fake := newServedFake(im)
	t.Cleanup(fake.Close)
	sink, err := tencentim.New(tencentim.Config{BaseURL: fake.URL(), SDKAppID: im.SDKAppID, AdminIdentifier: im.AdminIdentifier, SecretKey: im.SecretKey})
	require.NoError(t, err)
	for i := range servedFakeRecords + 20 {
		require.NoError(t, sink.Publish(context.Background(), outbox.Message{ID: fmt.Sprint("e", i), Key: "room-1", Type: "RoomUserJoined", Payload: []byte(`{}`)}))
	}
	reqs, msgs := fake.Requests(), fake.AllMessages()
	require.Equal(t, servedFakeRecords, len(reqs))
	require.Equal(t, servedFakeRecords, len(msgs))
	for i := range reqs {
		require.NotContains(t, reqs[i].Query, "usersig")
		require.Empty(t, msgs[i].UserSig)
	}
}

func TestLoadIMConfigNamesWhatIsMissing(t *testing.T) {
	t.Setenv("TENCENT_IM_SECRET_KEY", "")
	for _, tc := range []struct{ yaml, want string }{
		{"tencent_im:\n  sdk_app_id: 0\n", "tencent_im.sdk_app_id 0: must be positive"},
		{"tencent_im:\n  sdk_app_id: 1\n", "tencent_im.admin_identifier: required"},
		{"tencent_im:\n  sdk_app_id: 1\n  admin_identifier: a\n", "tencent_im.secret_key: required (or set TENCENT_IM_SECRET_KEY)"},
		{"tencent_im: [\n", "config "},
	} {
		path := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(path, []byte(tc.yaml), 0o600))
		_, err := loadIMConfig(path)
		require.ErrorContains(t, err, tc.want, tc.yaml)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte("tencent_im:\n  sdk_app_id: 1\n  admin_identifier: a\n  secret_key: from-file\n"), 0o600))
	t.Setenv("TENCENT_IM_SECRET_KEY", "from-env")
	im, err := loadIMConfig(path)
	require.NoError(t, err)
	require.Equal(t, "from-env", im.SecretKey, "the environment wins, as in room-service")
}
