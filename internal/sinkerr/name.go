package sinkerr

import "fmt"

// SizeFault says why name, a destination's name, is empty or longer
// than max bytes (maxName names that limit in the text), or "".
func SizeFault(name string, max int, maxName string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > max:
		return fmt.Sprintf("is %d bytes, over %s (%d)", len(name), maxName, max)
	}
	return ""
}
