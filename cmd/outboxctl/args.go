package main

import (
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/outboxrelay/outboxrelay/internal/dsnsafe"
	"github.com/outboxrelay/outboxrelay/internal/pgdsn"
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
// password; one in a PostgreSQL DSN's form (postgres://…, or KEY=VALUE
// with a connection keyword, which need no "@") is not shown.
func argText(a string) string {
	if pgdsn.Looks(a) {
		return "a PostgreSQL DSN (not shown: it may hold a password; pass it with --dsn)"
	}
	if !strings.Contains(a, "@") {
		return strconv.Quote(safe(a, false))
	}
	if cfg, err := dsnsafe.Parse(a); err == nil && cfg.Addr != "" && cfg.Net != "" && strings.Contains(a, "(") {
		return "a DSN (" + dsnsafe.Target(cfg) + "; pass it with --dsn)"
	}
	return `an argument with "@" (not shown: it may be a DSN, with a password)`
}

// extraArgs reports positional arguments a command does not take, as
// "stats takes no arguments, got "orders_outbox"": what the command
// takes, and what it got. When one of them names a table (lookup says
// which, if any), it says that --table was meant.
func (c *cli) extraArgs(takes string, got []string, lookup func([]string) string) int {
	quoted := make([]string, len(got))
	for i, a := range got {
		quoted[i] = argText(a)
	}
	msg := fmt.Sprintf("%s, got %s", takes, strings.Join(quoted, ", "))
	if lookup != nil {
		if t := lookup(got); t != "" {
			msg += fmt.Sprintf(" (to use table %s, pass --table %s)", t, t)
		}
	}
	return c.usageError("%s", msg)
}

// hintTimeout bounds the lookup behind a hint in a usage error: the
// mistake is reported even if the database is slow to answer.
const hintTimeout = 5 * time.Second

// tableInDB is an extraArgs lookup for commands that read the database:
// the first of args that is a table there. "" when none is, or the
// database cannot be reached (the usage error stands without a hint).
func (c *cli) tableInDB(args []string) string {
	if !slices.ContainsFunc(args, func(a string) bool { return a != "" && !strings.Contains(a, "@") }) {
		return ""
	}
	timeout := c.timeout
	c.timeout = min(c.timeout, hintTimeout)
	defer func() { c.timeout = timeout }()
	if c.db == nil {
		if _, err := c.dial(); err != nil {
			return ""
		}
		defer c.close()
	}
	l, err := call(c, c.listTables)
	if err != nil {
		return ""
	}
	for _, a := range args {
		if slices.Contains(l.all, a) {
			return a
		}
	}
	return ""
}

// givenFlags lists the flags of fs that the command line set, among
// names, as "--name" each.
func givenFlags(fs *flag.FlagSet, names ...string) []string {
	var given []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(names, f.Name) {
			given = append(given, "--"+f.Name)
		}
	})
	return given
}
