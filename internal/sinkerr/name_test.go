package sinkerr

import (
	"slices"
	"testing"
)

func TestSizeFault(t *testing.T) {
	got := []string{SizeFault("", 4, "MaxTopicBytes"), SizeFault("room", 4, "MaxTopicBytes"), SizeFault("rooms", 4, "MaxTopicBytes")}
	want := []string{"is empty", "", "is 5 bytes, over MaxTopicBytes (4)"}
	if !slices.Equal(got, want) {
		t.Errorf("SizeFault of an empty name, one at the limit and one over it: %q, want %q", got, want)
	}
}
