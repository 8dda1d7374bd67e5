package benchkit

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestAlternate(t *testing.T) {
	var order []int
	got, err := Alternate(3, 3, func(arm int) (string, error) {
		order = append(order, arm)
		return fmt.Sprint("r", len(order)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1, 2, 1, 2, 0, 2, 0, 1}; !slices.Equal(order, want) {
		t.Errorf("order of the runs: %v, want %v", order, want)
	}
	if want := [][]string{{"r1", "r6", "r8"}, {"r2", "r4", "r9"}, {"r3", "r5", "r7"}}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("results: %v, want %v", got, want)
	}
	boom := errors.New("boom")
	if _, err := Alternate(2, 2, func(arm int) (int, error) { return 0, boom }); err != boom {
		t.Errorf("the run's error: %v", err)
	}
}

func TestGrowthOverPrevious(t *testing.T) {
	counts := []int{0, 1, 3}
	fig := func(i int) float64 { return []float64{100, 110, 132}[i] }
	for i, want := range []string{"", "", "+10% per consumer added to 1 named (110 B)"} {
		if got := GrowthOverPrevious(counts, i, fig); got != want {
			t.Errorf("counts[%d]: %q, want %q", i, got, want)
		}
	}
}
