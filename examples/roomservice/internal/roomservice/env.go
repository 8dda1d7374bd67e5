package roomservice

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

// The environment variables that override the file, so that no secret
// needs to be in a config file or an image, and so that an image can be
// configured from the environment alone. A *_FILE variable names a file
// holding the value (a mounted Kubernetes or Docker secret), trimmed of
// its trailing newline; the plain variable wins when both are set.
const (
	EnvMySQLDSN        = svckit.EnvMySQLDSN
	EnvMySQLDSNFile    = svckit.EnvMySQLDSNFile
	EnvSecretKey       = "TENCENT_IM_SECRET_KEY"
	EnvSecretKeyFile   = "TENCENT_IM_SECRET_KEY_FILE"
	EnvBaseURL         = "TENCENT_IM_BASE_URL"
	EnvSDKAppID        = "TENCENT_IM_SDK_APP_ID"
	EnvAdminIdentifier = "TENCENT_IM_ADMIN_IDENTIFIER"
	EnvNodeID          = "ROOMSERVICE_NODE_ID"
	EnvNATSURL         = "NATS_URL"
	EnvNATSURLFile     = "NATS_URL_FILE"
)

// EnvSettings lists what the environment can set, in the order of the
// usage text.
var EnvSettings = []svckit.EnvSetting[Config]{
	svckit.Env(svckit.EnvVar{Var: EnvMySQLDSN, FileVar: EnvMySQLDSNFile, Key: "mysql.dsn"}, func(c *Config, v string) { c.MySQL.DSN = v }),
	svckit.Env(svckit.EnvVar{Var: EnvSecretKey, FileVar: EnvSecretKeyFile, Key: "tencent_im.secret_key"}, func(c *Config, v string) { c.TencentIM.SecretKey = v }),
	svckit.Env(svckit.EnvVar{Var: EnvBaseURL, Key: "tencent_im.base_url"}, func(c *Config, v string) { c.TencentIM.BaseURL = v }),
	{EnvVar: svckit.EnvVar{Var: EnvSDKAppID, Key: "tencent_im.sdk_app_id"}, Set: func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q: must be a positive integer", v)
		}
		c.TencentIM.SDKAppID = n
		return nil
	}},
	svckit.Env(svckit.EnvVar{Var: EnvAdminIdentifier, Key: "tencent_im.admin_identifier"}, func(c *Config, v string) { c.TencentIM.AdminIdentifier = v }),
	svckit.Env(svckit.EnvVar{Var: EnvNodeID, Key: "node_id"}, func(c *Config, v string) { c.NodeID = v }),
	svckit.Env(svckit.EnvVar{Var: EnvNATSURL, FileVar: EnvNATSURLFile, Key: "nats.url"}, func(c *Config, v string) { c.NATS.URL = v }),
}

// maxSecretFile bounds what a *_FILE variable's file may hold.
const maxSecretFile = svckit.MaxSecretFile
