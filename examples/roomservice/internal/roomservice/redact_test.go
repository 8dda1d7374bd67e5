package roomservice

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConfigNeverPrintsSecrets formats the configuration and each block
// that holds a secret every way a log line or an error might.
func TestConfigNeverPrintsSecrets(t *testing.T) {
	const password, key = "pw-Hunter2/with@odd:chars", "S3CRET-im-key-0123456789"
	var c Config
	c.NodeID = "node-1"
	c.MySQL.DSN = "app:" + password + "@tcp(db:3306)/rooms?parseTime=true"
	c.TencentIM = TencentIMConfig{BaseURL: "https://console.tim.qq.com", SDKAppID: 1400000000, AdminIdentifier: "admin", SecretKey: key}

	var out strings.Builder
	for _, v := range []any{c, &c, c.MySQL, &c.MySQL, c.TencentIM, &c.TencentIM} {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			fmt.Fprintf(&out, verb+"\n", v)
		}
		var text, js bytes.Buffer
		slog.New(slog.NewTextHandler(&text, nil)).Info("config", "cfg", v)
		slog.New(slog.NewJSONHandler(&js, nil)).Info("config", "cfg", v)
		out.WriteString(text.String() + js.String())
	}
	for _, secret := range []string{password, key, "Hunter2"} {
		require.NotContains(t, out.String(), secret)
		hex := fmt.Sprintf("%x", secret)
		require.NotContains(t, out.String(), hex[:min(32, len(hex))])
	}
	require.Contains(t, out.String(), "tcp(db:3306)", "what is not secret is still there")
	require.Contains(t, out.String(), "admin")

	bad := c
	bad.MySQL.DSN = "not a dsn " + password
	require.NotContains(t, fmt.Sprint(bad), password, "a DSN that does not parse is hidden whole")
}
