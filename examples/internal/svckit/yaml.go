package svckit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DecodeYAML decodes data into v strictly: an unknown key is an error, so
// that a typo fails start-up. Empty data leaves v as it is. A value of the
// wrong type is reported with its key, e.g. "outbox_worker.poll_interval
// (line 7): cannot unmarshal …".
func DecodeYAML(data []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return nameFields(data, err)
	}
	return nil
}

var yamlLineRE = regexp.MustCompile(`^line (\d+): (.*)$`)

// nameFields rewrites yaml's "line N: cannot unmarshal …" errors to name
// the key at that line, e.g. "outbox_worker.poll_interval: cannot …".
func nameFields(data []byte, err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, e := range te.Errors {
		msgs[i] = e
		if m := yamlLineRE.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			if path := keyAtLine(&root, line, ""); path != "" {
				msgs[i] = path + " (line " + m[1] + "): " + m[2]
			}
		}
	}
	return errors.New(strings.Join(msgs, "; "))
}

// keyAtLine returns the dotted path of the key whose value is on line.
func keyAtLine(n *yaml.Node, line int, prefix string) string {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		return keyAtLine(n.Content[0], line, prefix)
	}
	if n.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		path := key.Value
		if prefix != "" {
			path = prefix + "." + key.Value
		}
		if val.Line == line && val.Kind == yaml.ScalarNode {
			return path
		}
		if p := keyAtLine(val, line, path); p != "" {
			return p
		}
	}
	return ""
}

// LoadConfig reads the YAML file at path and parses it (parse is the
// service's ParseConfig). With path "", the settings come from the
// environment alone.
func LoadConfig[C any](path string, parse func([]byte) (C, error)) (C, error) {
	if path == "" {
		return parse(nil)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		var zero C
		return zero, fmt.Errorf("config: %w", err)
	}
	return parse(data)
}

// ParseConfig decodes data strictly (DecodeYAML: an unknown key is an
// error, so that a typo fails start-up; empty data is an empty file),
// applies the environment (env), fills the defaults and validates.
func ParseConfig[C any](data []byte, env []EnvSetting[C], withDefaults func(C) C, validate func(C) error) (C, error) {
	var c, zero C
	if err := DecodeYAML(data, &c); err != nil {
		return zero, fmt.Errorf("config: %w", err)
	}
	if err := ApplyEnv(&c, env); err != nil {
		return zero, err
	}
	c = withDefaults(c)
	if err := validate(c); err != nil {
		return zero, err
	}
	return c, nil
}
