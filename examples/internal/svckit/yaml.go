package svckit

import (
	"bytes"
	"errors"
	"io"
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
