// Package headernames holds what the broker sinks (sink/natsjs,
// sink/kafka) share about the names of the headers they forward.
package headernames

import (
	"slices"
	"strings"
)

// HasPrefixFold reports whether name starts with prefix, in any case.
func HasPrefixFold(name, prefix string) bool {
	return len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix)
}

// Matching returns the names in headers for which match holds, sorted:
// for a log line that names the headers a sink left out.
func Matching(headers map[string]string, match func(string) bool) []string {
	var names []string
	for name := range headers {
		if match(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}
