package activityservice

import (
	"github.com/outboxrelay/outboxrelay/examples/internal/svckit"
)

// The environment variables that override the file, as room-service's
// do: a *_FILE variable names a file holding the value (a mounted
// secret); the plain variable wins when both are set.
const (
	EnvMySQLDSN     = svckit.EnvMySQLDSN
	EnvMySQLDSNFile = svckit.EnvMySQLDSNFile
	EnvNATSURL      = svckit.EnvNATSURL
	EnvNATSURLFile  = svckit.EnvNATSURLFile
	EnvNodeID       = "ACTIVITY_NODE_ID"
	EnvHTTPAddr     = "ACTIVITY_HTTP_ADDR"
	EnvAdminAddr    = "ACTIVITY_ADMIN_ADDR"
)

// EnvSettings lists what the environment can set, in the order of the
// usage text.
var EnvSettings = []svckit.EnvSetting[Config]{
	svckit.MySQLEnv(func(c *Config) *MySQLConfig { return &c.MySQL }),
	svckit.Env(svckit.EnvVar{Var: EnvNATSURL, FileVar: EnvNATSURLFile, Key: "rooms.nats_url"}, func(c *Config, v string) { c.Rooms.NATSURL = v }),
	svckit.Env(svckit.EnvVar{Var: EnvNodeID, Key: "node_id"}, func(c *Config, v string) { c.NodeID = v }),
	svckit.Env(svckit.EnvVar{Var: EnvHTTPAddr, Key: "http.addr"}, func(c *Config, v string) { c.HTTP.Addr = v }),
	svckit.Env(svckit.EnvVar{Var: EnvAdminAddr, Key: "http.admin_addr"}, func(c *Config, v string) { c.HTTP.AdminAddr = v }),
}
