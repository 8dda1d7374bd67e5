package secretfmt

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestAnyInChain(t *testing.T) {
	secret := errors.New("pw=hunter2")
	has := func(e error) bool { return strings.Contains(e.Error(), "hunter2") && e == secret }
	long := error(errors.New("root"))
	for range 150 {
		long = fmt.Errorf("wrap: %w", long)
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"itself", secret, true},
		{"wrapped", fmt.Errorf("a: %w", secret), true},
		{"in a join tree", errors.Join(errors.New("x"), fmt.Errorf("b: %w", errors.Join(errors.New("y"), secret))), true},
		{"absent", fmt.Errorf("a: %w", errors.New("b")), false},
		{"too long to check counts", long, true},
	} {
		if got := AnyInChain(tc.err, has); got != tc.want {
			t.Errorf("%s: AnyInChain = %v, want %v", tc.name, got, tc.want)
		}
	}
}
