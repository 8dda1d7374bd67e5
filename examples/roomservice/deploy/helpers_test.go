package deploy

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
)

// decodeConfig decodes a room-service config file the way ParseConfig
// does (unknown keys are errors) and fills the defaults, without the
// environment or validation: what the timing checks need.
func decodeConfig(t *testing.T, data []byte) roomservice.Config {
	t.Helper()
	var c roomservice.Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&c))
	return c.WithDefaults()
}

// parseWithEnv runs roomservice.ParseConfig on data with env set, as the
// pod or the container would.
func parseWithEnv(t *testing.T, data []byte, env map[string]string) roomservice.Config {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	c, err := roomservice.ParseConfig(data)
	require.NoError(t, err)
	return c
}

// requireEnvDSN skips a test when roomservice.ParseConfig does not yet
// take the DSN from MYSQL_DSN (issue 14 adds it on another branch).
func requireEnvDSN(t *testing.T) {
	t.Helper()
	t.Setenv(roomservice.EnvMySQLDSN, "u:p@tcp(127.0.0.1:3306)/db")
	t.Setenv(roomservice.EnvSecretKey, "k")
	_, err := roomservice.ParseConfig([]byte("tencent_im:\n  base_url: https://console.tim.qq.com\n  sdk_app_id: 1\n  admin_identifier: a\n"))
	if err != nil && strings.Contains(err.Error(), "mysql.dsn: required") {
		t.Skipf("room-service does not read %s yet: %v", roomservice.EnvMySQLDSN, err)
	}
}

// addrPort is the port of a listen address such as ":8080".
func addrPort(t *testing.T, addr string) string {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	require.GreaterOrEqual(t, i, 0, "address %q has no port", addr)
	return addr[i+1:]
}
