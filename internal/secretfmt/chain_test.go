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

// TestChainStopsAfterLimit: a chain longer than the limit is cut after
// limit+1 errors, breadth first, nils left out.
func TestChainStopsAfterLimit(t *testing.T) {
	a, none := errors.New("a"), fmt.Errorf("no cause: %w", nil) // none wraps nil
	top := fmt.Errorf("top: %w", errors.Join(a, none))
	if got := Chain(top, 10); len(got) != 4 || got[0] != top || got[2] != a || got[3] != none {
		t.Errorf("Chain = %v, want top, the join, a, none", got)
	}
	if got := Chain(top, 1); len(got) != 2 {
		t.Errorf("Chain with limit 1 = %d errors, want 2", len(got))
	}
	if got := Chain(nil, 10); len(got) != 0 {
		t.Errorf("Chain(nil) = %v, want none", got)
	}
}
