package benchkit

import "fmt"

// Alternate runs each of arms arms rounds times and returns each arm's
// results in the order of the rounds. The order of the arms rotates from
// round to round (arm k first in round k), so that a slow spell of the
// machine falls on every arm, not on one side of a ratio. It stops at
// run's first error and returns it as it is: run names the arm in it.
func Alternate[T any](rounds, arms int, run func(arm int) (T, error)) ([][]T, error) {
	results := make([][]T, arms)
	for round := range rounds {
		for i := range arms {
			k := (i + round) % arms
			r, err := run(k)
			if err != nil {
				return nil, err
			}
			results[k] = append(results[k], r)
		}
	}
	return results, nil
}

// GrowthOverPrevious is the consumers scenario's growth of a figure
// (bytes per enqueued event) from one count of named consumers beside
// the default consumer to the next: for counts[i] named consumers, whose
// figure is fig(i), how much it grows per consumer added to the
// counts[i-1] before ("+4% per consumer added to 1 named (812 B)"), or
// "" when the count before is not a smaller, positive one.
func GrowthOverPrevious(counts []int, i int, fig func(i int) float64) string {
	if i == 0 || counts[i-1] <= 0 || counts[i] <= counts[i-1] {
		return ""
	}
	prev := fig(i - 1)
	return fmt.Sprintf("%s per consumer added to %d named (%.0f B)", GrowthPct(fig(i), prev, counts[i]-counts[i-1]), counts[i-1], prev)
}
