package sinkerr

import "testing"

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{Retryable: "retryable", Permanent: "permanent", Unavailable: "unavailable", 7: "Class(7)"} {
		if got := c.String(); got != want {
			t.Errorf("Class %d: %q, want %q", int(c), got, want)
		}
	}
}
