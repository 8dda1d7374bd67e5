package roomservice

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// clearEnv unsets every variable of EnvSettings for the test.
func clearEnv(t *testing.T) {
	for _, s := range EnvSettings {
		t.Setenv(s.Var, "")
		if s.FileVar != "" {
			t.Setenv(s.FileVar, "")
		}
	}
}

// writeFile writes content to a file of the test's and returns its path.
func writeFile(t *testing.T, name, content string) string {
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

// TestConfigFromTheEnvironmentAlone: an image needs no config file. Every
// required setting comes from the environment, secrets from files.
func TestConfigFromTheEnvironmentAlone(t *testing.T) {
	clearEnv(t)
	t.Setenv(EnvMySQLDSNFile, writeFile(t, "dsn", "app:pa/ss@word@tcp(db:3306)/rooms\n"))
	t.Setenv(EnvSecretKeyFile, writeFile(t, "key", "im-key\r\n"))
	t.Setenv(EnvBaseURL, "https://console.tim.qq.com")
	t.Setenv(EnvSDKAppID, "1400000001")
	t.Setenv(EnvAdminIdentifier, "admin")
	t.Setenv(EnvNodeID, "pod-7")
	cfg, err := LoadConfig("")
	require.NoError(t, err)
	require.Equal(t, "app:pa/ss@word@tcp(db:3306)/rooms", cfg.MySQL.DSN, "trimmed of its newline")
	require.Equal(t, TencentIMConfig{BaseURL: "https://console.tim.qq.com", SDKAppID: 1400000001, AdminIdentifier: "admin", SecretKey: "im-key"}, cfg.TencentIM)
	require.Equal(t, "pod-7", cfg.NodeID)
	require.Equal(t, DefaultMaxOpenConns, cfg.MySQL.MaxOpenConns, "defaults still apply")
}

// TestEnvironmentPrecedence: the plain variable, then its _FILE, then the
// config file.
func TestEnvironmentPrecedence(t *testing.T) {
	file := "mysql:\n  dsn: \"file@tcp(db:3306)/rooms\"\n" + imBlock + "node_id: from-file\n"
	dsnFile := writeFile(t, "dsn", "secretfile@tcp(db:3306)/rooms")
	keyFile := writeFile(t, "key", "key-from-file\n")
	cases := []struct {
		name          string
		env           map[string]string
		wantDSN, key  string
		wantNode, url string
	}{
		{"file only", nil, "file@tcp(db:3306)/rooms", "k", "from-file", "https://console.tim.qq.com"},
		{"_FILE over the file", map[string]string{EnvMySQLDSNFile: dsnFile, EnvSecretKeyFile: keyFile},
			"secretfile@tcp(db:3306)/rooms", "key-from-file", "from-file", "https://console.tim.qq.com"},
		{"plain over _FILE", map[string]string{EnvMySQLDSNFile: dsnFile, EnvMySQLDSN: "env@tcp(db:3306)/rooms", EnvSecretKeyFile: keyFile, EnvSecretKey: "key-env"},
			"env@tcp(db:3306)/rooms", "key-env", "from-file", "https://console.tim.qq.com"},
		{"non-secret settings", map[string]string{EnvNodeID: "pod-1", EnvBaseURL: "https://adminapisgp.im.qcloud.com"},
			"file@tcp(db:3306)/rooms", "k", "pod-1", "https://adminapisgp.im.qcloud.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := ParseConfig([]byte(file))
			require.NoError(t, err)
			require.Equal(t, tc.wantDSN, cfg.MySQL.DSN)
			require.Equal(t, tc.key, cfg.TencentIM.SecretKey)
			require.Equal(t, tc.wantNode, cfg.NodeID)
			require.Equal(t, tc.url, cfg.TencentIM.BaseURL)
		})
	}
}

// TestEnvironmentMistakes: errors name the variable and the path, never
// what the file holds.
func TestEnvironmentMistakes(t *testing.T) {
	const secret = "app:Hunter2-Secret@tcp(db:3306)/rooms"
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-file")
	empty := writeFile(t, "empty", "\n")
	big := writeFile(t, "big", secret+string(make([]byte, maxSecretFile)))
	cases := []struct {
		name  string
		env   map[string]string
		wants []string
	}{
		{"missing DSN file", map[string]string{EnvMySQLDSNFile: missing}, []string{"config: MYSQL_DSN_FILE=" + missing + ": cannot open: no such file or directory"}},
		{"DSN file is a directory", map[string]string{EnvMySQLDSNFile: dir}, []string{"config: MYSQL_DSN_FILE=" + dir + ": cannot read", "is a directory"}},
		{"empty key file", map[string]string{EnvSecretKeyFile: empty}, []string{"config: TENCENT_IM_SECRET_KEY_FILE=" + empty + ": the file is empty"}},
		{"huge DSN file", map[string]string{EnvMySQLDSNFile: big}, []string{"MYSQL_DSN_FILE=" + big + ": larger than 65536 bytes"}},
		{"bad SDK app ID", map[string]string{EnvSDKAppID: "14000x"}, []string{`config: TENCENT_IM_SDK_APP_ID: "14000x": must be a positive integer`}},
		{"nothing set", nil, []string{"mysql.dsn: required (or set MYSQL_DSN or MYSQL_DSN_FILE)", "tencent_im.base_url: required (or set TENCENT_IM_BASE_URL)",
			"tencent_im.sdk_app_id 0: must be positive (or set TENCENT_IM_SDK_APP_ID)", "tencent_im.admin_identifier: required (or set TENCENT_IM_ADMIN_IDENTIFIER)",
			"tencent_im.secret_key: required (set TENCENT_IM_SECRET_KEY or TENCENT_IM_SECRET_KEY_FILE)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, err := LoadConfig("")
			require.Error(t, err)
			for _, want := range tc.wants {
				require.ErrorContains(t, err, want)
			}
			require.NotContains(t, err.Error(), "Hunter2")
		})
	}
}
