package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/outboxrelay/outboxrelay/examples/roomservice/internal/roomservice"
)

// graceMargin is what terminationGracePeriodSeconds keeps above
// drain_delay + shutdown_timeout: the kubelet's SIGKILL must never cut
// the last publish or MySQL's close short.
const graceMargin = 5 * time.Second

func TestKubernetesManifestsAreComplete(t *testing.T) {
	ms := loadManifests(t, kubernetesDir)
	var kinds []string
	for k := range ms {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	require.Equal(t, []string{"ConfigMap", "Deployment", "Kustomization", "PodDisruptionBudget", "Secret", "Service"}, kinds)

	files, err := filepath.Glob(filepath.Join(kubernetesDir, "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			want = append(want, b)
		}
	}
	got := slices.Clone(ms["Kustomization"].Resources)
	slices.Sort(got)
	require.Equal(t, want, got, "kustomization.yaml lists every manifest")
}

func TestKubernetesDeployment(t *testing.T) {
	ms := loadManifests(t, kubernetesDir)
	var dep deploymentSpec
	decodeSpec(t, ms["Deployment"], &dep)
	pod := dep.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	cfg := decodeConfig(t, []byte(ms["ConfigMap"].Data["config.yaml"]))

	t.Run("grace period covers drain and shutdown", func(t *testing.T) {
		grace := time.Duration(pod.TerminationGracePeriodSeconds) * time.Second
		need := cfg.HTTP.DrainDelayOrDefault() + cfg.ShutdownTimeout + graceMargin
		require.GreaterOrEqual(t, grace, need, "terminationGracePeriodSeconds %v: must be at least drain_delay %v + shutdown_timeout %v + %v",
			grace, cfg.HTTP.DrainDelayOrDefault(), cfg.ShutdownTimeout, graceMargin)
		require.Greater(t, cfg.ShutdownTimeout, cfg.OutboxWorker.PublishTimeout, "shutdown_timeout covers the worker's last publish")
	})
	t.Run("probes", func(t *testing.T) {
		ports := portByName(c)
		require.Equal(t, addrPort(t, cfg.HTTP.Addr), fmt.Sprint(ports["http"]), "port http is http.addr's")
		require.Equal(t, addrPort(t, cfg.HTTP.AdminAddr), fmt.Sprint(ports["admin"]), "port admin is http.admin_addr's")
		for name, p := range map[string]struct {
			probe *probe
			path  string
		}{"liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}, "startup": {c.StartupProbe, "/healthz"}} {
			require.NotNil(t, p.probe, name)
			require.NotNil(t, p.probe.HTTPGet, name)
			require.Equal(t, p.path, p.probe.HTTPGet.Path, name)
			require.Equal(t, "http", p.probe.HTTPGet.Port, "%s probe: on the public port, which serves it too", name)
		}
	})
	t.Run("environment", func(t *testing.T) {
		env := envByName(c)
		secret := ms["Secret"]
		for _, name := range []string{roomservice.EnvMySQLDSN, roomservice.EnvSecretKey} {
			e, ok := env[name]
			require.True(t, ok, name)
			require.Empty(t, e.Value, "%s: from the Secret, never inline", name)
			require.NotNil(t, e.ValueFrom, name)
			ref := e.ValueFrom.SecretKeyRef
			require.NotNil(t, ref, name)
			require.Equal(t, secret.Metadata.Name, ref.Name, name)
			require.Contains(t, secret.StringData, ref.Key, "%s: key %q is in the Secret", name, ref.Key)
		}
		node := env["ROOMSERVICE_NODE_ID"]
		require.NotNil(t, node.ValueFrom)
		require.NotNil(t, node.ValueFrom.FieldRef)
		require.Equal(t, "metadata.name", node.ValueFrom.FieldRef.FieldPath, "each pod is a node of its own")
	})
	t.Run("config from the ConfigMap", func(t *testing.T) {
		require.Len(t, pod.Volumes, 1)
		require.NotNil(t, pod.Volumes[0].ConfigMap)
		require.Equal(t, ms["ConfigMap"].Metadata.Name, pod.Volumes[0].ConfigMap.Name)
		require.Len(t, c.VolumeMounts, 1)
		require.Equal(t, pod.Volumes[0].Name, c.VolumeMounts[0].Name)
		require.Equal(t, []string{"-config", filepath.Join(c.VolumeMounts[0].MountPath, "config.yaml")}, c.Args)
	})
	t.Run("security and resources", func(t *testing.T) {
		require.Equal(t, true, pod.SecurityContext["runAsNonRoot"])
		require.Equal(t, true, c.SecurityCtx["readOnlyRootFilesystem"])
		require.Equal(t, false, c.SecurityCtx["allowPrivilegeEscalation"])
		require.NotEmpty(t, c.Resources["requests"]["cpu"])
		require.NotEmpty(t, c.Resources["requests"]["memory"])
		require.NotEmpty(t, c.Resources["limits"]["memory"])
	})
	t.Run("scraped on the admin port", func(t *testing.T) {
		a := dep.Template.Metadata.Annotations
		require.Equal(t, "true", a["prometheus.io/scrape"])
		require.Equal(t, fmt.Sprint(portByName(c)["admin"]), a["prometheus.io/port"])
		require.Equal(t, "/metrics", a["prometheus.io/path"])
		require.NotEqual(t, "127.0.0.1", strings.Split(cfg.HTTP.AdminAddr, ":")[0], "a loopback admin listener cannot be scraped")
	})
	t.Run("dashboard through a port-forward only", func(t *testing.T) {
		require.Contains(t, ms["ConfigMap"].Data["config.yaml"], "outbox_ui_hosts: []", "the ConfigMap says which hosts serve the dashboard")
		require.Empty(t, cfg.HTTP.OutboxUIHosts, "loopback only: what kubectl port-forward sends; the pod's IP is refused")
		require.True(t, cfg.HTTP.OutboxUIReadOnly)
	})
	t.Run("labels", func(t *testing.T) {
		labels := dep.Template.Metadata.Labels
		requireSelects(t, "Deployment", dep.Selector.MatchLabels, labels)
		var pdb pdbSpec
		decodeSpec(t, ms["PodDisruptionBudget"], &pdb)
		requireSelects(t, "PodDisruptionBudget", pdb.Selector.MatchLabels, labels)
		require.Positive(t, pdb.MinAvailable)
		var svc serviceSpec
		decodeSpec(t, ms["Service"], &svc)
		requireSelects(t, "Service", svc.Selector, labels)
	})
}

// requireSelects checks that selector is non-empty and matches labels.
func requireSelects(t *testing.T, who string, selector, labels map[string]string) {
	t.Helper()
	require.NotEmpty(t, selector, who)
	for k, v := range selector {
		require.Equal(t, v, labels[k], "%s selects %s=%s, which the pods do not have", who, k, v)
	}
}

func TestKubernetesServiceExposesTheAPIOnly(t *testing.T) {
	ms := loadManifests(t, kubernetesDir)
	var svc serviceSpec
	decodeSpec(t, ms["Service"], &svc)
	require.Len(t, svc.Ports, 1)
	require.Equal(t, "http", svc.Ports[0].TargetPort, "not the admin port")
}

func TestKubernetesSecretHoldsPlaceholdersOnly(t *testing.T) {
	ms := loadManifests(t, kubernetesDir)
	s := ms["Secret"]
	require.Empty(t, s.Data, "stringData only, so that the placeholders can be read")
	require.NotEmpty(t, s.StringData)
	for k, v := range s.StringData {
		require.Contains(t, v, "CHANGE_ME", "%s: a placeholder, never a real value", k)
	}
	raw, err := os.ReadFile(filepath.Join(kubernetesDir, s.File))
	require.NoError(t, err)
	require.Contains(t, string(raw), "PLACEHOLDERS ONLY")
}

// TestKubernetesConfigParses: the ConfigMap's config, with the Secret's
// values in the environment as the pod has them, is one room-service
// starts with.
func TestKubernetesConfigParses(t *testing.T) {
	ms := loadManifests(t, kubernetesDir)
	data := []byte(ms["ConfigMap"].Data["config.yaml"])
	requireEnvDSN(t)
	secret := ms["Secret"].StringData
	cfg := parseWithEnv(t, data, map[string]string{
		roomservice.EnvMySQLDSN:  secret["mysql-dsn"],
		roomservice.EnvSecretKey: secret["tencent-im-secret-key"],
	})
	require.Equal(t, secret["mysql-dsn"], cfg.MySQL.DSN)
	require.Equal(t, "https://console.tim.qq.com", cfg.TencentIM.BaseURL)
	require.False(t, cfg.TencentIM.Fake)
	require.NotContains(t, string(data), "CHANGE_ME", "no secret in the ConfigMap")
}
