package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"
)

// durationHelp is how every duration flag's usage describes its values.
const durationHelp = "e.g. 90s, 45m, 12h, 1d, 2d12h, 1w (units ns, us, ms, s, m, h, d for 24h, w for 7d)"

// maxDays is the longest duration in whole days (time.Duration holds
// about 292 years).
const maxDays = int64(1<<63-1) / int64(24*time.Hour)

// parseDuration parses a duration as time.ParseDuration does, with days
// (d, 24h) and weeks (w, 7d) on top: "1d", "2d12h", "1w", "1.5d". A
// negative duration is refused, as is one too long for time.Duration.
// Its errors say what is wrong with the value, without repeating it:
// the flag's error names the flag and the value.
func parseDuration(s string) (time.Duration, error) {
	switch {
	case s == "":
		return 0, errors.New("empty: " + durationHelp)
	case strings.HasPrefix(s, "-"):
		return 0, errors.New("must not be negative")
	case s == "0" || s == "+0":
		return 0, nil
	}
	rest := strings.TrimPrefix(s, "+")
	var total time.Duration
	for rest != "" {
		num := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		switch {
		case num == 0 && total == 0 && !strings.ContainsAny(s, "0123456789"):
			return 0, errors.New("not a duration: " + durationHelp)
		case num == 0:
			return 0, fmt.Errorf("a unit must follow a number: %s", durationHelp)
		case num < 0:
			return 0, fmt.Errorf("%s what? give a unit: %s", rest, durationHelp)
		}
		unitEnd := strings.IndexFunc(rest[num:], func(r rune) bool { return (r >= '0' && r <= '9') || r == '.' })
		if unitEnd < 0 {
			unitEnd = len(rest) - num
		}
		n, unit := rest[:num], rest[num:num+unitEnd]
		rest = rest[num+unitEnd:]
		d, err := durationPart(n, unit)
		if err != nil {
			return 0, err
		}
		if total > 1<<63-1-d {
			return 0, fmt.Errorf("too long: at most %dd (about 292 years)", maxDays)
		}
		total += d
	}
	return total, nil
}

// durationPart is one number and its unit.
func durationPart(n, unit string) (time.Duration, error) {
	per := time.Duration(1)
	switch unit {
	case "d":
		per, unit = 24, "h"
	case "w":
		per, unit = 7*24, "h"
	case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
	default:
		return 0, fmt.Errorf("unknown unit %q: %s", unit, durationHelp)
	}
	if strings.Count(n, ".") > 1 || strings.Trim(n, ".") == "" {
		return 0, fmt.Errorf("%q is not a number: %s", n, durationHelp)
	}
	d, err := time.ParseDuration(n + unit)
	if err != nil || d > (1<<63-1)/per {
		// A well-formed number fails only when out of range.
		return 0, fmt.Errorf("too long: at most %dd (about 292 years)", maxDays)
	}
	return d * per, nil
}

// durationFlag defines a duration flag that takes parseDuration's
// durations, with value as its default.
func durationFlag(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var((*durationValue)(p), name, usage)
}

// durationValue is a flag.Value for parseDuration's durations, so that
// every duration flag takes days and weeks.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

// Get makes it a flag.Getter.
func (d *durationValue) Get() any { return time.Duration(*d) }
