package backend

import "fmt"

// CheckOutcomes is what a store's Settle does first with its outcomes: it
// refuses an unknown Kind and a negative RetryIn (naming the outcome, its
// errors prefixed with what), and keeps the last outcome of each ID, in
// the order given. It returns outcomes itself when no ID repeats.
func CheckOutcomes(what string, outcomes []Outcome) ([]Outcome, error) {
	last := make(map[string]int, len(outcomes))
	for i, o := range outcomes {
		switch o.Kind {
		case OutcomePublished, OutcomeRetry, OutcomeDead, OutcomeRelease:
		default:
			return nil, fmt.Errorf("%s: settle %q: unknown kind %d", what, o.ID, int(o.Kind))
		}
		if o.Kind == OutcomeRetry && o.RetryIn < 0 {
			return nil, fmt.Errorf("%s: settle %q: RetryIn %v: must not be negative", what, o.ID, o.RetryIn)
		}
		last[o.ID] = i
	}
	if len(last) == len(outcomes) {
		return outcomes, nil
	}
	out := make([]Outcome, 0, len(last))
	for i, o := range outcomes {
		if last[o.ID] == i {
			out = append(out, o)
		}
	}
	return out, nil
}

// AllPublished says whether outcomes is not empty and every one of them
// is OutcomePublished: the settle a store can make cheapest.
func AllPublished(outcomes []Outcome) bool {
	for _, o := range outcomes {
		if o.Kind != OutcomePublished {
			return false
		}
	}
	return len(outcomes) > 0
}
