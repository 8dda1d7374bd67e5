package main

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// modulePath is the root module's path; the workspace's other modules
// are under it, at their directories' paths.
const modulePath = "github.com/outboxrelay/outboxrelay"

// shellLangs are the info strings of the fenced blocks whose commands
// are checked.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "zsh": true}

// token is a word of a shell command, or an operator (op).
type token struct {
	text string
	op   bool
}

// command is one simple command of a block, and its line.
type command struct {
	words []string
	line  int
}

// checkBlock checks every command of a fenced shell block. Each line
// runs from the repository's root; cd changes the directory for the
// rest of its line (cd X && go test ./...).
func (c *checker) checkBlock(file string, b block) ([]finding, error) {
	var out []finding
	cwd, line := ".", 0
	for _, cmd := range blockCommands(b) {
		if cmd.line != line { // each line starts at the root
			cwd, line = ".", cmd.line
		}
		if cwd == "" {
			continue // after a cd that failed: reported already
		}
		msgs, newCwd, err := c.checkCommand(cwd, cmd.words)
		if err != nil {
			return nil, err
		}
		cwd = newCwd
		for _, m := range msgs {
			out = append(out, finding{file, cmd.line, m})
		}
	}
	return out, nil
}

// blockCommands splits a block into simple commands: lines joined at a
// trailing backslash, prompts ("$ ") dropped (in a console block, lines
// without one are output), comments dropped, and commands split at ;,
// &&, ||, &, parentheses and pipes. A pipe followed by a flag is no
// pipe but a synopsis's "or" (outboxctl requeue ID | --all), and
// continues the command.
func blockCommands(b block) []command {
	var out []command
	for i := 0; i < len(b.lines); i++ {
		line, start := b.lines[i], b.line+i
		for strings.HasSuffix(line, "\\") && i+1 < len(b.lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + b.lines[i]
		}
		t := strings.TrimSpace(line)
		if p, ok := strings.CutPrefix(t, "$ "); ok {
			t = p
		} else if b.lang == "console" {
			continue
		}
		toks := tokenize(t)
		var words []string
		flush := func() {
			if len(words) > 0 {
				out = append(out, command{words: words, line: start})
			}
			words = nil
		}
		for j, tok := range toks {
			if !tok.op {
				words = append(words, tok.text)
				continue
			}
			if tok.text == "|" && j+1 < len(toks) && !toks[j+1].op && strings.HasPrefix(strings.TrimLeft(toks[j+1].text, "["), "-") {
				continue
			}
			flush()
		}
		flush()
	}
	return out
}

// tokenize splits a shell line into words and operators, honouring
// quotes and backslashes and dropping a comment.
func tokenize(s string) []token {
	var out []token
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			out = append(out, token{text: cur.String()})
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				j = len(s) - i - 1
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"':
			inWord = true
			for i++; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				cur.WriteByte(s[i])
			}
		case ch == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			inWord = true
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '#' && !inWord:
			flush()
			return out
		case ch == ';' || ch == '(' || ch == ')':
			flush()
			out = append(out, token{text: string(ch), op: true})
		case ch == '&' || ch == '|':
			flush()
			op := string(ch)
			if i+1 < len(s) && s[i+1] == ch {
				op += op
				i++
			}
			out = append(out, token{text: op, op: true})
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	return out
}

var (
	envAssignRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
	// keywords that may start a command before the program's name.
	leadingWords = map[string]bool{"do": true, "then": true, "else": true, "elif": true, "if": true, "while": true, "until": true, "!": true, "time": true, "exec": true, "sudo": true, "{": true}
	// words that start a shell construct whose rest is not a command.
	constructWords = map[string]bool{"for": true, "case": true, "done": true, "fi": true, "esac": true, "}": true, "select": true, "function": true}
)

// checkCommand checks one simple command run in cwd (relative to the
// root), and returns the directory the next command runs in.
func (c *checker) checkCommand(cwd string, words []string) (msgs []string, next string, err error) {
	env := map[string]string{}
	for len(words) > 0 && (leadingWords[words[0]] || envAssignRE.MatchString(words[0])) {
		if name, value, ok := strings.Cut(words[0], "="); ok && envAssignRE.MatchString(words[0]) {
			env[name] = value
		}
		words = words[1:]
	}
	if len(words) == 0 || constructWords[words[0]] {
		return nil, cwd, nil
	}
	switch words[0] {
	case "cd":
		return c.checkCd(cwd, words[1:])
	case "go":
		msgs, err := c.checkGo(cwd, env, words[1:])
		return msgs, cwd, err
	case "outboxctl":
		msgs, err := c.checkOutboxctl(words[1:])
		return msgs, cwd, err
	case "docker", "kubectl":
		return c.checkFileFlags(cwd, words[1:], "-f", "--file", "-k", "--kustomize"), cwd, nil
	}
	return c.checkScript(cwd, words[0]), cwd, nil
}

// checkScript checks that a command run by its path relative to cwd
// (.ci/services, ./bin/x) is a file of the repository.
func (c *checker) checkScript(cwd, name string) []string {
	if !strings.Contains(name, "/") || strings.ContainsAny(name, "$~*`") || path.IsAbs(name) {
		return nil
	}
	if p := path.Join(cwd, name); !c.isFile(p) {
		return []string{name + ": no file " + p + " in the repository"}
	}
	return nil
}

// checkCd checks that cd's directory exists; the next directory is ""
// when it does not.
func (c *checker) checkCd(cwd string, args []string) ([]string, string, error) {
	if len(args) == 0 || strings.ContainsAny(args[0], "$~") || args[0] == "-" || path.IsAbs(args[0]) {
		return nil, cwd, nil
	}
	dir := path.Join(cwd, args[0])
	if !c.isDir(dir) {
		return []string{"cd " + args[0] + ": no directory " + dir + " in the repository"}, "", nil
	}
	return nil, dir, nil
}

// goValueFlags are the go command's flags that take a value as the next
// word (-run X), so that X is not read as a package.
var goValueFlags = map[string]bool{
	"run": true, "bench": true, "benchtime": true, "count": true, "cpu": true, "fuzz": true, "fuzztime": true,
	"timeout": true, "tags": true, "o": true, "p": true, "coverprofile": true, "coverpkg": true, "covermode": true,
	"cpuprofile": true, "memprofile": true, "blockprofile": true, "mutexprofile": true, "outputdir": true,
	"modfile": true, "ldflags": true, "gcflags": true, "asmflags": true, "mod": true, "parallel": true,
	"skip": true, "shuffle": true, "exec": true, "vettool": true, "json": false, "C": true, "f": true,
}

// checkGo checks the packages a go command names: each of the
// repository's (a relative path, or an import path under modulePath)
// must exist, hold Go files, and for go run be a main package whose
// flags the command's arguments use.
func (c *checker) checkGo(cwd string, env map[string]string, args []string) ([]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "run", "test", "build", "vet", "install", "get", "list", "doc", "generate":
	default:
		return nil, nil
	}
	var msgs []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !hasValue && goValueFlags[name] {
				i++
			}
			continue
		}
		dir, pattern, ours := c.goPackageDir(cwd, sub, a)
		if !ours {
			if sub == "run" {
				return msgs, nil // not ours: its arguments are not either
			}
			continue
		}
		if m := c.checkPackage(cwd, env, sub, a, dir, pattern); m != "" {
			msgs = append(msgs, m)
			if sub == "run" {
				return msgs, nil
			}
			continue
		}
		if sub == "run" {
			prog := args[i+1:]
			if dir == "cmd/outboxctl" {
				m, err := c.checkOutboxctl(prog)
				return append(msgs, m...), err
			}
			msgs = append(msgs, c.checkProgramFlags(cwd, a, dir, prog)...)
			return msgs, nil
		}
	}
	return msgs, nil
}

// goPackageDir maps a go command's package argument to a directory
// relative to the root; ours is false for a package of another module
// (or a word with shell expansion in it).
func (c *checker) goPackageDir(cwd, sub, a string) (dir string, pattern, ours bool) {
	if strings.ContainsAny(a, "$*`") {
		return "", false, false
	}
	if sub == "get" || sub == "install" || sub == "run" {
		a, _, _ = strings.Cut(a, "@")
	}
	switch {
	case a == modulePath || strings.HasPrefix(a, modulePath+"/"):
		dir = strings.TrimPrefix(strings.TrimPrefix(a, modulePath), "/")
	case a == "." || a == ".." || strings.HasPrefix(a, "./") || strings.HasPrefix(a, "../"):
		dir = path.Join(cwd, a)
	default:
		return "", false, false
	}
	if dir == "" {
		dir = "."
	}
	if dir == "..." || strings.HasSuffix(dir, "/...") {
		return path.Clean(strings.TrimSuffix(strings.TrimSuffix(dir, "..."), "/")), true, true
	}
	return path.Clean(dir), false, true
}

// checkPackage checks one package argument; it returns what is wrong,
// or "".
func (c *checker) checkPackage(cwd string, env map[string]string, sub, arg, dir string, pattern bool) string {
	if dir == ".." || strings.HasPrefix(dir, "../") {
		return "go " + sub + " " + arg + ": outside the repository"
	}
	if !c.isDir(dir) {
		return "go " + sub + " " + arg + ": no directory " + dir + " in the repository"
	}
	if env["GOWORK"] == "off" && c.moduleOf(dir) != c.moduleOf(cwd) {
		return "go " + sub + " " + arg + ": with GOWORK=off, " + dir + " is not in the module of " + cwd
	}
	if pattern {
		return ""
	}
	if sub == "get" {
		if c.isFile(path.Join(dir, "go.mod")) || len(c.goFiles(dir, false)) > 0 {
			return ""
		}
		return "go get " + arg + ": " + dir + " is neither a module nor a package"
	}
	withTests := sub == "test" || sub == "vet" || sub == "list" || sub == "doc" || sub == "generate"
	files := c.goFiles(dir, withTests)
	if len(files) == 0 {
		return "go " + sub + " " + arg + ": no Go files in " + dir
	}
	if sub == "run" && !c.isMain(files) {
		return "go run " + arg + ": " + dir + " is not a main package"
	}
	return ""
}

// checkProgramFlags checks the flags a go run command passes to its
// program: each must be one the package defines (found in its source as
// fs.String("name", …) or fs.StringVar(&v, "name", …)). A package whose
// flags cannot be found so is not checked. Paths given to -config must
// exist.
func (c *checker) checkProgramFlags(cwd, arg, dir string, args []string) []string {
	defined := c.programFlags(dir)
	var msgs []string
	if len(defined) > 0 {
		for _, a := range args {
			a = strings.Trim(a, "[]")
			if !strings.HasPrefix(a, "-") || a == "-" || a == "--" {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !defined[name] && name != "h" && name != "help" {
				msgs = append(msgs, "go run "+arg+": the program has no flag -"+name)
			}
		}
	}
	return append(msgs, c.checkFileFlags(cwd, args, "-config", "--config")...)
}

// checkFileFlags checks that the files or directories given to the
// named flags exist (relative to cwd).
func (c *checker) checkFileFlags(cwd string, args []string, names ...string) []string {
	var msgs []string
	for i, a := range args {
		for _, n := range names {
			var value string
			if a == n && i+1 < len(args) {
				value = args[i+1]
			} else if v, ok := strings.CutPrefix(a, n+"="); ok {
				value = v
			} else {
				continue
			}
			if value == "" || strings.ContainsAny(value, "$~*") || path.IsAbs(value) || strings.HasPrefix(value, "-") {
				continue
			}
			p := path.Join(cwd, value)
			if !c.exists(p) {
				msgs = append(msgs, n+" "+value+": no "+p+" in the repository")
			}
		}
	}
	return msgs
}

var (
	flagDefRE    = regexp.MustCompile(`\.(?:String|Bool|Int|Int64|Uint|Uint64|Float64|Duration|Func|BoolFunc)\(\s*"([^"]+)"`)
	flagVarDefRE = regexp.MustCompile(`\.(?:StringVar|BoolVar|IntVar|Int64Var|UintVar|Uint64Var|Float64Var|DurationVar|TextVar|Var)\(\s*[^,]+?,\s*"([^"]+)"`)
)

// repoImportRE matches an import of one of the repository's packages.
var repoImportRE = regexp.MustCompile(`"` + regexp.QuoteMeta(modulePath) + `/([^"]+)"`)

// programFlags are the flag names a main package defines in its own
// files and in the repository's packages those files import (a shared
// command shell, say, that defines -config for several programs).
func (c *checker) programFlags(dir string) map[string]bool {
	defined := map[string]bool{}
	c.addFlags(defined, dir, true)
	return defined
}

// addFlags adds the flags defined in dir's files to defined and, when
// follow, those of the repository packages they import (one level).
func (c *checker) addFlags(defined map[string]bool, dir string, follow bool) {
	for _, f := range c.goFiles(dir, false) {
		b, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(f)))
		if err != nil {
			continue
		}
		for _, re := range []*regexp.Regexp{flagDefRE, flagVarDefRE} {
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				defined[m[1]] = true
			}
		}
		if follow {
			for _, m := range repoImportRE.FindAllStringSubmatch(string(b), -1) {
				c.addFlags(defined, m[1], false)
			}
		}
	}
}

// goFiles lists dir's .go files (relative to the root), _test.go files
// too when withTests.
func (c *checker) goFiles(dir string, withTests bool) []string {
	entries, err := os.ReadDir(filepath.Join(c.root, filepath.FromSlash(dir)))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || (!withTests && strings.HasSuffix(n, "_test.go")) {
			continue
		}
		out = append(out, path.Join(dir, n))
	}
	return out
}

// isMain reports whether one of files is in package main.
func (c *checker) isMain(files []string) bool {
	for _, f := range files {
		fh, err := os.Open(filepath.Join(c.root, filepath.FromSlash(f)))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); strings.HasPrefix(l, "package ") {
				fh.Close()
				if l == "package main" {
					return true
				}
				break
			}
		}
		fh.Close()
	}
	return false
}

// moduleOf is the directory of the module that holds dir: the nearest
// one with a go.mod.
func (c *checker) moduleOf(dir string) string {
	for d := path.Clean(dir); ; d = path.Dir(d) {
		if c.isFile(path.Join(d, "go.mod")) || d == "." || d == "/" {
			return d
		}
	}
}

func (c *checker) stat(rel string) (os.FileInfo, error) {
	return os.Stat(filepath.Join(c.root, filepath.FromSlash(rel)))
}

func (c *checker) exists(rel string) bool { _, err := c.stat(rel); return err == nil }

func (c *checker) isDir(rel string) bool { st, err := c.stat(rel); return err == nil && st.IsDir() }

func (c *checker) isFile(rel string) bool { st, err := c.stat(rel); return err == nil && !st.IsDir() }
