package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// cliSpec is what outboxctl accepts: its commands, and each command's
// flags (without dashes).
type cliSpec struct {
	flags map[string]map[string]bool
}

// checkOutboxctl checks outboxctl's arguments: a command it has, flags
// after it that the command defines (placeholders in brackets are read
// without them), and for help a command name.
func (c *checker) checkOutboxctl(args []string) ([]string, error) {
	spec, err := c.cli()
	if err != nil {
		return nil, err
	}
	sub := ""
	var msgs []string
	for i, a := range args {
		a = strings.Trim(a, "[]")
		if a == "" {
			continue
		}
		if strings.HasPrefix(a, "-") {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			switch {
			case name == "":
				return msgs, nil // --: the rest are arguments
			case sub == "":
				if name == "h" || name == "help" {
					return msgs, nil
				}
				msgs = append(msgs, "outboxctl: flag "+a+" before the command (flags go after it)")
			case name == "h" || name == "help" || spec.flags[sub][name]:
			default:
				msgs = append(msgs, "outboxctl "+sub+": no flag --"+name+" (it has "+spec.flagList(sub)+")")
			}
			continue
		}
		if sub != "" {
			if sub == "help" && i > 0 && !strings.Contains(a, "|") {
				if _, ok := spec.flags[a]; !ok {
					msgs = append(msgs, "outboxctl help "+a+": no such command (it has "+spec.commandList()+")")
				}
				sub = "help " // names after the first are arguments
			}
			continue
		}
		sub = a
		if _, ok := spec.flags[sub]; !ok && sub != "help" {
			msgs = append(msgs, "outboxctl "+sub+": no such command (it has "+spec.commandList()+")")
			return msgs, nil
		}
	}
	return msgs, nil
}

func (s *cliSpec) commandList() string {
	var names []string
	for n := range s.flags {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (s *cliSpec) flagList(sub string) string {
	var names []string
	for n := range s.flags[sub] {
		names = append(names, "--"+n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// buildOutboxctl builds cmd/outboxctl and asks it for its commands
// (outboxctl help) and each command's flags (outboxctl help COMMAND).
func buildOutboxctl(root string) (*cliSpec, error) {
	tmp, err := os.MkdirTemp("", "docscheck")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "outboxctl")
	build := exec.Command("go", "build", "-o", bin, "./cmd/outboxctl")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/outboxctl: %v\n%s", err, out)
	}
	helpOf := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"help"}, args...)...)
		cmd.Env = outboxctlEnv()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("outboxctl help %s: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		return out.String(), nil
	}
	usage, err := helpOf()
	if err != nil {
		return nil, err
	}
	spec := &cliSpec{flags: map[string]map[string]bool{}}
	for _, name := range parseCommands(usage) {
		if name == "help" {
			spec.flags[name] = map[string]bool{"json": true}
			continue
		}
		text, err := helpOf(name)
		if err != nil {
			return nil, err
		}
		spec.flags[name] = parseFlags(text)
	}
	if len(spec.flags) < 2 {
		return nil, fmt.Errorf("outboxctl help lists no commands:\n%s", usage)
	}
	return spec, nil
}

// outboxctlEnv is the environment without outboxctl's own variables, so
// that a developer's settings cannot change what help prints.
func outboxctlEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTBOXCTL_") && !strings.HasPrefix(kv, "MYSQL_DSN") {
			env = append(env, kv)
		}
	}
	return env
}

var (
	commandLineRE = regexp.MustCompile(`^  ([a-z][a-z0-9-]*)\s+\S`)
	flagLineRE    = regexp.MustCompile(`^  -{1,2}([A-Za-z0-9][A-Za-z0-9-]*)`)
)

// parseCommands reads the command names from outboxctl's usage: the
// indented lines after the "usage:" line, up to the first blank line
// after them.
func parseCommands(usage string) []string {
	var names []string
	inList := false
	for _, line := range strings.Split(usage, "\n") {
		if m := commandLineRE.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
			inList = true
			continue
		}
		if inList && strings.TrimSpace(line) == "" {
			break
		}
	}
	return names
}

// parseFlags reads the flag names from a command's usage (the flag
// package's PrintDefaults: "  -name type").
func parseFlags(usage string) map[string]bool {
	flags := map[string]bool{}
	for _, line := range strings.Split(usage, "\n") {
		if m := flagLineRE.FindStringSubmatch(line); m != nil {
			flags[m[1]] = true
		}
	}
	return flags
}
