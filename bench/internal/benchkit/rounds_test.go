package benchkit

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestAlternate(t *testing.T) {
	var order []int
	got, err := Alternate(3, 3, nil, func(arm int) (string, error) {
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
	if _, err := Alternate(2, 2, nil, func(arm int) (int, error) { return 0, boom }); err != boom {
		t.Errorf("the run's error: %v", err)
	}
	_, err = Alternate(2, 2, func(arm int) string { return fmt.Sprint("arm ", arm) }, func(arm int) (int, error) { return 0, boom })
	if !errors.Is(err, boom) || err.Error() != "arm 0: boom" {
		t.Errorf("the run's error, named: %v", err)
	}
}

func TestConsumerGrowth(t *testing.T) {
	counts := []int{0, 1, 3}
	fig := func(i int) float64 { return []float64{100, 110, 132}[i] }
	overDefault := func(base int) []string { return []string{fmt.Sprint("over ", fig(base))} }
	for i, want := range [][2]string{
		{"", ""},
		{"over 100", "< 10% per consumer added"},
		{"over 100; +10% per consumer added to 1 named (110 B)", "< 10% per consumer added"},
	} {
		if ratio, target := ConsumerGrowth(counts, i, fig, overDefault); ratio != want[0] || target != want[1] {
			t.Errorf("counts[%d]: %q, %q; want %q", i, ratio, target, want)
		}
	}
	if ratio, target := ConsumerGrowth([]int{1, 3}, 1, fig, overDefault); ratio != "+5% per consumer added to 1 named (100 B)" || target != "" {
		t.Errorf("without the default alone: %q, %q", ratio, target)
	}
}
