package activityservice

import (
	"errors"
	"fmt"

	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

// The environment variables that override the file, as room-service's
// do: a *_FILE variable names a file holding the value (a mounted
// secret); the plain variable wins when both are set.
const (
	EnvMySQLDSN     = "MYSQL_DSN"
	EnvMySQLDSNFile = "MYSQL_DSN_FILE"
	EnvNATSURL      = "NATS_URL"
	EnvNATSURLFile  = "NATS_URL_FILE"
	EnvNodeID       = "ACTIVITY_NODE_ID"
	EnvHTTPAddr     = "ACTIVITY_HTTP_ADDR"
	EnvAdminAddr    = "ACTIVITY_ADMIN_ADDR"
)

// EnvSetting is one setting the environment can give.
type EnvSetting struct {
	// Var is the variable; FileVar, when not empty, the variable naming a
	// file that holds the value.
	Var, FileVar string
	// Key is the setting's key in the config file, e.g. "mysql.dsn".
	Key string
	set func(c *Config, v string)
}

// EnvSettings lists what the environment can set, in the order of the
// usage text.
var EnvSettings = []EnvSetting{
	{EnvMySQLDSN, EnvMySQLDSNFile, "mysql.dsn", func(c *Config, v string) { c.MySQL.DSN = v }},
	{EnvNATSURL, EnvNATSURLFile, "rooms.nats_url", func(c *Config, v string) { c.Rooms.NATSURL = v }},
	{EnvNodeID, "", "node_id", func(c *Config, v string) { c.NodeID = v }},
	{EnvHTTPAddr, "", "http.addr", func(c *Config, v string) { c.HTTP.Addr = v }},
	{EnvAdminAddr, "", "http.admin_addr", func(c *Config, v string) { c.HTTP.AdminAddr = v }},
}

// applyEnv overrides c with every setting the environment gives. Errors
// name the variable, and the path of a file, never a secret's value.
func (c *Config) applyEnv() error {
	var errs []error
	for _, s := range EnvSettings {
		v, err := svckit.LookupEnv(s.Var, s.FileVar)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v != "" {
			s.set(c, v)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: environment: %w", err)
	}
	return nil
}
