package main

import (
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
)

// The flag package's parse errors, which flagError rewrites.
const (
	flagUndefined = "flag provided but not defined: -"
	flagNoValue   = "flag needs an argument: -"
)

// flagInvalid matches the flag package's error for a value a flag's Set
// refused: "invalid value "1x" for flag -limit: parse error", and
// "invalid boolean value …" for a bool flag.
var flagInvalid = regexp.MustCompile(`^invalid (?:boolean )?value ("(?:[^"\\]|\\.)*") for (?:flag )?-(\S+): (.*)$`)

// flagError rewrites an error of fs.Parse to name the flag as usage
// does (--name), the value at fault and what is wrong with it, and to
// suggest the nearest flag for one that fs does not define.
func flagError(fs *flag.FlagSet, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, flagUndefined); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		return fmt.Sprintf("unknown flag --%s%s", safe(name, false), didYouMean(name, "--", names))
	}
	if name, ok := strings.CutPrefix(msg, flagNoValue); ok {
		return fmt.Sprintf("--%s needs a value", name)
	}
	m := flagInvalid.FindStringSubmatch(msg)
	if m == nil || fs.Lookup(m[2]) == nil {
		return msg
	}
	value, uerr := strconv.Unquote(m[1])
	if uerr != nil {
		value = m[1]
	}
	reason := m[3]
	if g, ok := fs.Lookup(m[2]).Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64:
			reason = map[string]string{"parse error": "not a whole number", "value out of range": "out of range"}[reason]
		case bool:
			reason = "must be true or false (or the flag alone, for true)"
		}
	}
	if reason == "" {
		reason = m[3]
	}
	return fmt.Sprintf("--%s %s: %s", m[2], argText(value), reason)
}

// argText quotes a command-line argument for an error message. One with
// an "@" may be a DSN given where another argument goes: it is shown as
// the DSN's user, address and database, or not at all, never with its
// password.
func argText(a string) string {
	if !strings.Contains(a, "@") {
		return strconv.Quote(safe(a, false))
	}
	if cfg, err := dsnsafe.Parse(a); err == nil && cfg.Addr != "" && cfg.Net != "" && strings.Contains(a, "(") {
		return "a DSN (" + dsnsafe.Target(cfg) + "; pass it with --dsn)"
	}
	return `an argument with "@" (not shown: it may be a DSN, with a password)`
}
