package deploy

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The parts of the manifests the tests read; the decoder ignores the
// rest. spec is kept as a node and decoded by kind.
type (
	meta struct {
		Name        string            `yaml:"name"`
		Labels      map[string]string `yaml:"labels"`
		Annotations map[string]string `yaml:"annotations"`
	}
	manifest struct {
		File       string            `yaml:"-"`
		APIVersion string            `yaml:"apiVersion"`
		Kind       string            `yaml:"kind"`
		Metadata   meta              `yaml:"metadata"`
		Data       map[string]string `yaml:"data"`
		StringData map[string]string `yaml:"stringData"`
		Resources  []string          `yaml:"resources"`
		Spec       yaml.Node         `yaml:"spec"`
	}
	labelSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	}
	deploymentSpec struct {
		Selector labelSelector `yaml:"selector"`
		Template struct {
			Metadata meta    `yaml:"metadata"`
			Spec     podSpec `yaml:"spec"`
		} `yaml:"template"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               map[string]any `yaml:"securityContext"`
		Containers                    []container    `yaml:"containers"`
		Volumes                       []struct {
			Name      string `yaml:"name"`
			ConfigMap *struct {
				Name string `yaml:"name"`
			} `yaml:"configMap"`
		} `yaml:"volumes"`
	}
	container struct {
		Name           string `yaml:"name"`
		Image          string `yaml:"image"`
		Args           []string
		Ports          []namedPort                  `yaml:"ports"`
		Env            []envVar                     `yaml:"env"`
		LivenessProbe  *probe                       `yaml:"livenessProbe"`
		ReadinessProbe *probe                       `yaml:"readinessProbe"`
		StartupProbe   *probe                       `yaml:"startupProbe"`
		Resources      map[string]map[string]string `yaml:"resources"`
		SecurityCtx    map[string]any               `yaml:"securityContext"`
		VolumeMounts   []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	namedPort struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}
	envVar struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			FieldRef *struct {
				FieldPath string `yaml:"fieldPath"`
			} `yaml:"fieldRef"`
		} `yaml:"valueFrom"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"` // by name: the tests want named ports
		} `yaml:"httpGet"`
	}
	serviceSpec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []struct {
			Name       string `yaml:"name"`
			Port       int    `yaml:"port"`
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
	}
	pdbSpec struct {
		MinAvailable int           `yaml:"minAvailable"`
		Selector     labelSelector `yaml:"selector"`
	}
)

// kubernetesDir holds the manifests.
const kubernetesDir = "kubernetes"

// loadManifests decodes every document of every YAML file in dir, by
// kind; a kind twice is an error, as these manifests have one of each.
func loadManifests(t *testing.T, dir string) map[string]manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no manifests in %s", dir)
	out := map[string]manifest{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var m manifest
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else {
				require.NoError(t, err, f)
			}
			require.NotEmpty(t, m.Kind, "%s: a document without a kind", f)
			require.NotContains(t, out, m.Kind, "%s: a second %s", f, m.Kind)
			m.File = filepath.Base(f)
			out[m.Kind] = m
		}
	}
	return out
}

// decodeSpec decodes m's spec into v.
func decodeSpec(t *testing.T, m manifest, v any) {
	t.Helper()
	require.NoError(t, m.Spec.Decode(v), "%s: spec", m.File)
}

// envByName indexes a container's environment.
func envByName(c container) map[string]envVar {
	out := map[string]envVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// portByName indexes a container's ports.
func portByName(c container) map[string]int {
	out := map[string]int{}
	for _, p := range c.Ports {
		out[p.Name] = p.ContainerPort
	}
	return out
}
