package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
)

// The files these tests check, from this directory.
var (
	dockerfilePath   = filepath.Join("..", "Dockerfile")
	composePath      = filepath.Join("..", "compose.yaml")
	envExamplePath   = filepath.Join("..", ".env.example")
	productionConfig = filepath.Join("..", "config.production.yaml")
	dockerignorePath = filepath.Join("..", "..", "..", ".dockerignore")
)

// stage is one FROM of a Dockerfile and the instructions under it.
type stage struct {
	name, from string
	lines      []string // instructions, continuation lines joined
}

// parseDockerfile splits a Dockerfile into stages; comments go, and
// backslash-continued lines are joined.
func parseDockerfile(t *testing.T, path string) []stage {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		if f := strings.Fields(line); strings.EqualFold(f[0], "FROM") {
			s := stage{from: f[1]}
			if len(f) == 4 && strings.EqualFold(f[2], "AS") {
				s.name = f[3]
			}
			stages = append(stages, s)
			return
		}
		require.NotEmpty(t, stages, "%s: %q before the first FROM", path, line)
		stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
	}
	for _, raw := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(raw), "#") {
			continue
		}
		if body, ok := strings.CutSuffix(strings.TrimRight(raw, " \t"), "\\"); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(raw)
		flush()
	}
	flush()
	return stages
}

var pinnedImage = regexp.MustCompile(`^[a-z0-9./_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$`)

func TestDockerfileBasesArePinned(t *testing.T) {
	stages := parseDockerfile(t, dockerfilePath)
	names := map[string]bool{}
	for _, s := range stages {
		if !names[s.from] {
			require.Regexp(t, pinnedImage, s.from, "FROM %s: pin the base by digest", s.from)
		}
		names[s.name] = true
	}
}

// TestDockerfileImageIsProduction: the default target, roomservice, has
// the production command, its health check and the production config;
// never the demo, the fake or the compose config.
func TestDockerfileImageIsProduction(t *testing.T) {
	stages := parseDockerfile(t, dockerfilePath)
	last := stages[len(stages)-1]
	require.Equal(t, "roomservice", last.name, "the last stage is the default target")
	var copies []string
	for _, l := range last.lines {
		if strings.HasPrefix(l, "COPY ") || strings.HasPrefix(l, "ADD ") {
			copies = append(copies, l)
		}
	}
	joined := strings.Join(copies, "\n")
	for _, banned := range []string{"config.docker.yaml", "/demo", "build-demo", ".env"} {
		require.NotContains(t, joined, banned, "the roomservice image must not get %s", banned)
	}
	require.Contains(t, joined, "examples/roomservice/config.production.yaml /etc/roomservice/config.yaml")
	require.Contains(t, joined, "/out/healthcheck /healthcheck")
	require.Contains(t, strings.Join(last.lines, "\n"), `ENTRYPOINT ["/roomservice", "-config", "/etc/roomservice/config.yaml"]`)
}

// TestProductionConfig: the image's config holds no secret and no fake,
// and with the environment of a real deployment it is one room-service
// starts with, against the real Tencent IM.
func TestProductionConfig(t *testing.T) {
	data, err := os.ReadFile(productionConfig)
	require.NoError(t, err)
	c := decodeConfig(t, data)
	require.Empty(t, c.MySQL.DSN, "the DSN comes from the environment")
	require.Empty(t, c.TencentIM.SecretKey, "the key comes from the environment")
	require.False(t, c.TencentIM.Fake)
	require.Equal(t, "https://console.tim.qq.com", c.TencentIM.BaseURL)
	require.Equal(t, ":9090", c.HTTP.AdminAddr, "reachable by a scraper in a container")
	require.Empty(t, c.HTTP.OutboxUIHosts, "the dashboard answers to loopback (a port-forward) only, not to the scraper's network")
	require.True(t, c.HTTP.OutboxUIReadOnly)

	requireEnvDSN(t)
	t.Setenv("TENCENT_IM_SDK_APP_ID", "1400000001")
	parsed, err := roomservice.ParseConfig(data)
	if err != nil && strings.Contains(err.Error(), "sdk_app_id 0") {
		t.Skipf("room-service does not read TENCENT_IM_SDK_APP_ID yet: %v", err)
	}
	require.NoError(t, err)
	require.Equal(t, 1400000001, parsed.TencentIM.SDKAppID)
}

// composeFile is the part of compose.yaml the tests read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Healthcheck *struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
		Build *struct {
			Target string `yaml:"target"`
		} `yaml:"build"`
		NetworkMode string   `yaml:"network_mode"`
		Volumes     []string `yaml:"volumes"`
	} `yaml:"services"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	data, err := os.ReadFile(composePath)
	require.NoError(t, err)
	var c composeFile
	require.NoError(t, yaml.Unmarshal(data, &c))
	return c
}

// secretish names environment variables that carry a secret.
var secretish = regexp.MustCompile(`PASSWORD|SECRET|DSN|_KEY$`)

// interpolated matches a ${VAR...} reference.
var interpolated = regexp.MustCompile(`\$\{[A-Z_]+`)

func TestComposeHasNoPasswordInIt(t *testing.T) {
	c := loadCompose(t)
	for name, svc := range c.Services {
		for k, v := range svc.Environment {
			if !secretish.MatchString(k) {
				continue
			}
			switch {
			case strings.Contains(k, "DSN"):
				_, rest, ok := strings.Cut(v, ":")
				require.True(t, ok, "%s %s: a DSN with user:password", name, k)
				require.True(t, strings.HasPrefix(rest, "${"), "%s %s: the password comes from .env", name, k)
			default:
				require.Regexp(t, `^\$\{[A-Z_]+(:?[-?][^}]*)?\}$`, v, "%s %s: from .env, not written here", name, k)
			}
		}
	}
	// Every variable compose requires is in .env.example.
	data, err := os.ReadFile(composePath)
	require.NoError(t, err)
	example, err := os.ReadFile(envExamplePath)
	require.NoError(t, err)
	for _, ref := range interpolated.FindAllString(string(data), -1) {
		require.Contains(t, string(example), strings.TrimPrefix(ref, "${")+"=", ".env.example lists %s", ref)
	}
}

func TestComposeBindsPortsToLoopback(t *testing.T) {
	c := loadCompose(t)
	published := 0
	for name, svc := range c.Services {
		for _, p := range svc.Ports {
			require.True(t, strings.HasPrefix(p, "127.0.0.1:"), "%s publishes %q beyond the host's loopback", name, p)
			published++
		}
	}
	require.Equal(t, 2, published, "the API and the admin port")
}

func TestComposeHealthChecks(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"mysql", "roomservice"} {
		hc := c.Services[name].Healthcheck
		require.NotNil(t, hc, "%s has a health check", name)
		require.NotEmpty(t, hc.Test, name)
	}
	// distroless has no shell: the check must be the image's own binary.
	require.Equal(t, []string{"CMD", "/healthcheck", "http://127.0.0.1:8080/readyz"}, c.Services["roomservice"].Healthcheck.Test)
}

func TestComposeRunsTheFakeBesideTheImage(t *testing.T) {
	c := loadCompose(t)
	rs, fake := c.Services["roomservice"], c.Services["fake-im"]
	require.Equal(t, "roomservice", rs.Build.Target)
	require.Equal(t, "fake-im", fake.Build.Target)
	require.Equal(t, "service:roomservice", fake.NetworkMode, "the fake is on room-service's loopback")
	require.Contains(t, rs.Volumes, "./config.docker.yaml:/etc/roomservice/config.yaml:ro", "the fake's config is mounted, not baked")
	require.NotContains(t, fake.Environment, roomservice.EnvMySQLDSN, "the fake gets no database password")
}

func TestDockerignoreKeepsSecretsOut(t *testing.T) {
	data, err := os.ReadFile(dockerignorePath)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	for _, want := range []string{"**/.env", "**/.env.*", "**/*.local.yaml", "**/*.pem", "**/*.key"} {
		require.Contains(t, lines, want)
	}
}
