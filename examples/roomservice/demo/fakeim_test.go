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

	"github.com/outboxrelay/outboxrelay/outbox"
	"github.com/outboxrelay/outboxrelay/outbox/outboxtest"
	"github.com/outboxrelay/outboxrelay/sink/tencentim"
)

// TestServeFakeIMForAConfig serves the fake for a config and delivers
// through it with the credentials of that config, as room-service would.
func TestServeFakeIMForAConfig(t *testing.T) {
	t.Setenv("TENCENT_IM_SECRET_KEY", "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "mysql:\n  dsn: \"root@tcp(127.0.0.1:3306)/rooms\"\n"+
		"tencent_im:\n  base_url: \"http://%s\"\n  sdk_app_id: 1400000001\n  admin_identifier: admin\n  secret_key: k1\n", addr), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serveFakeIM(ctx, path, io.Discard) }()
	outboxtest.Eventually(t, "the fake listens", func() bool {
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
