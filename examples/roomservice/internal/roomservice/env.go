package roomservice

import (
	"errors"
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
	EnvMySQLDSN        = "MYSQL_DSN"
	EnvMySQLDSNFile    = "MYSQL_DSN_FILE"
	EnvSecretKey       = "TENCENT_IM_SECRET_KEY"
	EnvSecretKeyFile   = "TENCENT_IM_SECRET_KEY_FILE"
	EnvBaseURL         = "TENCENT_IM_BASE_URL"
	EnvSDKAppID        = "TENCENT_IM_SDK_APP_ID"
	EnvAdminIdentifier = "TENCENT_IM_ADMIN_IDENTIFIER"
	EnvNodeID          = "ROOMSERVICE_NODE_ID"
	EnvNATSURL         = "NATS_URL"
	EnvNATSURLFile     = "NATS_URL_FILE"
)

// EnvSetting is one setting the environment can give.
type EnvSetting struct {
	// Var is the variable; FileVar, when not empty, the variable naming a
	// file that holds the value.
	Var, FileVar string
	// Key is the setting's key in the config file, e.g. "mysql.dsn".
	Key string
	set func(c *Config, v string) error
}

// EnvSettings lists what the environment can set, in the order of the
// usage text.
var EnvSettings = []EnvSetting{
	{EnvMySQLDSN, EnvMySQLDSNFile, "mysql.dsn", func(c *Config, v string) error { c.MySQL.DSN = v; return nil }},
	{EnvSecretKey, EnvSecretKeyFile, "tencent_im.secret_key", func(c *Config, v string) error { c.TencentIM.SecretKey = v; return nil }},
	{EnvBaseURL, "", "tencent_im.base_url", func(c *Config, v string) error { c.TencentIM.BaseURL = v; return nil }},
	{EnvSDKAppID, "", "tencent_im.sdk_app_id", func(c *Config, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q: must be a positive integer", v)
		}
		c.TencentIM.SDKAppID = n
		return nil
	}},
	{EnvAdminIdentifier, "", "tencent_im.admin_identifier", func(c *Config, v string) error { c.TencentIM.AdminIdentifier = v; return nil }},
	{EnvNodeID, "", "node_id", func(c *Config, v string) error { c.NodeID = v; return nil }},
	{EnvNATSURL, EnvNATSURLFile, "nats.url", func(c *Config, v string) error { c.NATS.URL = v; return nil }},
}

// maxSecretFile bounds what a *_FILE variable's file may hold.
const maxSecretFile = svckit.MaxSecretFile

// applyEnv overrides c with every setting the environment gives. Errors
// name the variable, and the path of a file, never a secret's value.
func (c *Config) applyEnv() error {
	var errs []error
	for _, s := range EnvSettings {
		v, err := s.lookup()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v == "" {
			continue
		}
		if err := s.set(c, v); err != nil {
			errs = append(errs, fmt.Errorf("config: %s: %w", s.Var, err))
		}
	}
	return errors.Join(errs...)
}

// lookup returns the setting's value: the plain variable's, else the
// content of the file FileVar names, else "".
func (s EnvSetting) lookup() (string, error) { return svckit.LookupEnv(s.Var, s.FileVar) }
