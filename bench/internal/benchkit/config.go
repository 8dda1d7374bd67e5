package benchkit

import (
	"fmt"
	"strconv"
	"strings"
)

// Config is one configuration of a compare scenario: how many workers
// drain the backlog, the batch each claims, and the events' payload in
// bytes.
type Config struct {
	Workers, Batch, Payload int
}

// String is c as the -compare flag writes it: WORKERSxBATCHxPAYLOAD.
func (c Config) String() string { return fmt.Sprintf("%dx%dx%d", c.Workers, c.Batch, c.Payload) }

// ParseConfigs reads the -compare flag: WORKERSxBATCHxPAYLOAD, separated
// by commas, each number positive.
func ParseConfigs(s string) ([]Config, error) {
	var out []Config
	for _, part := range strings.Split(s, ",") {
		fields := strings.Split(strings.TrimSpace(part), "x")
		if len(fields) != 3 {
			return nil, fmt.Errorf("%q is not WORKERSxBATCHxPAYLOAD (such as 4x200x512)", part)
		}
		var n [3]int
		for i, f := range fields {
			v, err := strconv.Atoi(f)
			if err != nil || v <= 0 {
				return nil, fmt.Errorf("%q: %q is not a positive number", part, f)
			}
			n[i] = v
		}
		out = append(out, Config{Workers: n[0], Batch: n[1], Payload: n[2]})
	}
	return out, nil
}

// FormatConfigs is cs as the -compare flag takes them.
func FormatConfigs(cs []Config) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.String()
	}
	return strings.Join(parts, ",")
}
