package benchkit

import (
	"fmt"
	"slices"
	"strings"
)

// Alternate runs each of arms arms rounds times and returns each arm's
// results in the order of the rounds. The order of the arms rotates from
// round to round (arm k first in round k), so that a slow spell of the
// machine falls on every arm, not on one side of a ratio. It stops at
// run's first error and returns it after the arm's name ("relay: …"),
// or as it is when name is nil.
func Alternate[T any](rounds, arms int, name func(arm int) string, run func(arm int) (T, error)) ([][]T, error) {
	results := make([][]T, arms)
	for round := range rounds {
		for i := range arms {
			k := (i + round) % arms
			r, err := run(k)
			if err != nil && name != nil {
				return nil, fmt.Errorf("%s: %w", name(k), err)
			}
			if err != nil {
				return nil, err
			}
			results[k] = append(results[k], r)
		}
	}
	return results, nil
}

// ConsumerGrowth is the Ratio and the Target of the consumers
// scenario's row for counts[i] named consumers beside the default
// consumer, whose figure (bytes per enqueued event) is fig(i): the
// figure's growth per consumer added against the default consumer alone
// (what overDefault says, given the index of counts' 0), then against
// the count before, when that is a smaller, positive one ("+4% per
// consumer added to 1 named (812 B)"); and the target when the default
// alone was measured.
func ConsumerGrowth(counts []int, i int, fig func(i int) float64, overDefault func(base int) []string) (ratio, target string) {
	var growth []string
	if base := slices.Index(counts, 0); base >= 0 && counts[i] > 0 {
		growth = append(growth, overDefault(base)...)
		target = "< 10% per consumer added"
	}
	if i > 0 && counts[i-1] > 0 && counts[i] > counts[i-1] {
		prev := fig(i - 1)
		growth = append(growth, fmt.Sprintf("%s per consumer added to %d named (%.0f B)", GrowthPct(fig(i), prev, counts[i]-counts[i-1]), counts[i-1], prev))
	}
	return strings.Join(growth, "; "), target
}
