package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
	"github.com/outboxrelay/outboxrelay/sink/tencentim/tencentimtest"
)

// startFakeIM starts a Tencent IM fake with a random secret key and
// returns it with the tencent_im block that points at it. Close it after
// the app has shut down.
func startFakeIM() (*tencentimtest.Server, roomservice.TencentIMConfig) {
	var key [16]byte
	_, _ = rand.Read(key[:])
	im := roomservice.TencentIMConfig{SDKAppID: 1400000000, AdminIdentifier: "administrator", SecretKey: hex.EncodeToString(key[:])}
	fake := tencentimtest.NewServer(tencentimtest.Config{SDKAppID: im.SDKAppID, SecretKey: im.SecretKey, AdminIdentifier: im.AdminIdentifier})
	im.BaseURL = fake.URL()
	return fake, im
}

// servedFakeRecords is how many calls and messages the -fake-im server
// keeps: nothing reads them, so a few, for a debugger to look at.
const servedFakeRecords = 100

// newServedFake starts the fake that -fake-im serves for im: it runs for
// as long as a local setup does, so it keeps a few records, and none
// with a UserSig.
func newServedFake(im roomservice.TencentIMConfig) *tencentimtest.Server {
	return tencentimtest.NewServer(tencentimtest.Config{SDKAppID: im.SDKAppID, SecretKey: im.SecretKey, AdminIdentifier: im.AdminIdentifier,
		MaxRecords: servedFakeRecords, ForgetUserSigs: true})
}

// loadIMConfig reads the tencent_im block of the room-service config at
// path; TENCENT_IM_SECRET_KEY overrides its secret_key, as in
// room-service. The other blocks are room-service's business: the fake
// needs no database, so it does not ask for a DSN.
func loadIMConfig(path string) (roomservice.TencentIMConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return roomservice.TencentIMConfig{}, fmt.Errorf("config: %w", err)
	}
	var cfg struct {
		TencentIM roomservice.TencentIMConfig `yaml:"tencent_im"`
	}
	if err := yaml.Unmarshal(data, &cfg); err != nil {
		return roomservice.TencentIMConfig{}, fmt.Errorf("config %s: %w", path, err)
	}
	im := cfg.TencentIM
	if key := os.Getenv(roomservice.EnvSecretKey); key != "" {
		im.SecretKey = key
	}
	switch {
	case im.SDKAppID <= 0:
		return im, fmt.Errorf("config %s: tencent_im.sdk_app_id %d: must be positive", path, im.SDKAppID)
	case im.AdminIdentifier == "":
		return im, fmt.Errorf("config %s: tencent_im.admin_identifier: required", path)
	case im.SecretKey == "":
		return im, fmt.Errorf("config %s: tencent_im.secret_key: required (or set %s)", path, roomservice.EnvSecretKey)
	}
	return im, nil
}

// serveFakeIM serves a Tencent IM fake for the room-service configuration
// at path, until ctx is done: on the address of its tencent_im.base_url
// (plain http, which the sink accepts only on loopback), accepting its SDK
// app ID, admin identifier and secret key (TENCENT_IM_SECRET_KEY
// overrides the file's, as in room-service).
func serveFakeIM(ctx context.Context, path string, out io.Writer) error {
	if path == "" {
		return errors.New("-fake-im needs -config: the room-service config whose tencent_im block the fake serves")
	}
	im, err := loadIMConfig(path)
	if err != nil {
		return err
	}
	u, err := url.Parse(im.BaseURL)
	if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("tencent_im.base_url %q: the fake serves http://HOST:PORT (a loopback address)", im.BaseURL)
	}
	fake := newServedFake(im)
	defer fake.Close()
	target, err := url.Parse(fake.URL())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return fmt.Errorf("fake IM: %w", err)
	}
	// tencentimtest listens on a port of its own choosing; the proxy puts
	// it where the config expects it.
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "Tencent IM fake at %s for %s (sdk_app_id %d, admin_identifier %s); stop with Ctrl-C\n",
		im.BaseURL, path, im.SDKAppID, im.AdminIdentifier)
	select {
	case <-ctx.Done():
	case err := <-served:
		return fmt.Errorf("fake IM: %w", err)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(stopCtx)
}
