// Package sqlgolden keeps a store's golden file of SQL statements: every
// statement the store runs, written out whole under the function that
// runs it, so that a reader greps a function's name and reads the SQL.
// A store's test drives every path of the store with a Recorder told of
// each statement as the store fills its names in, checks that every call
// site of that filling-in ran (Sites, Recorder.Missing), and compares the
// file with what ran (Check). For tests only.
package sqlgolden

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Recorder records statements by the function (and source line) that
// ran them.
type Recorder struct {
	// Normalize, if set, rewrites each statement before it is recorded
	// (a value a store writes into its text, shown as one fixed value).
	Normalize func(string) string

	pkg  string
	skip func(runtime.Frame) bool

	mu     sync.Mutex
	byFunc map[string][]string // function -> distinct statements, sorted
	lines  map[string][]int    // file -> lines a statement was run from
}

// NewRecorder returns a Recorder for the package named pkg (as in its
// functions' runtime names: "mysql"). A statement is recorded under the
// first caller of Log for which skip is false: skip passes over the
// store's own filling-in functions.
func NewRecorder(pkg string, skip func(runtime.Frame) bool) *Recorder {
	return &Recorder{pkg: pkg, skip: skip, byFunc: map[string][]string{}, lines: map[string][]int{}}
}

// limit is a claim's limit written into its statement: shown as a claim
// of 100 records'.
var limit = regexp.MustCompile(`LIMIT ([2-9]|[1-9][0-9]+)\b`)

// Log records stmt under its caller.
func (r *Recorder) Log(stmt string) {
	stmt = limit.ReplaceAllString(stmt, "LIMIT 101")
	if r.Normalize != nil {
		stmt = r.Normalize(stmt)
	}
	pcs := make([]uintptr, 16)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		frame, more := frames.Next()
		own := strings.Contains(frame.Function, "/internal/sqlgolden.")
		if (!own && !r.skip(frame)) || !more {
			r.add(r.funcName(frame.Function), filepath.Base(frame.File), frame.Line, stmt)
			return
		}
	}
}

func (r *Recorder) add(fn, file string, line int, stmt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.byFunc[fn], stmt) {
		r.byFunc[fn] = append(r.byFunc[fn], stmt)
		slices.Sort(r.byFunc[fn])
	}
	r.lines[file] = append(r.lines[file], line)
}

var (
	closureSuffix = regexp.MustCompile(`(\.func\d+|\.gowrap\d+|\.\d+|\[\.\.\.\])+$`)
	outerFunc     = regexp.MustCompile(`^.*\.func\d+\.`)
)

// funcName turns a runtime function name into the source's:
// ".../store/mysql.(*channel).claim.func1" -> "channel.claim". A
// function inlined into a closure is named after both: the inner one
// is kept ("Store.AddConsumer.func1.(*Store).register.1" ->
// "Store.register").
func (r *Recorder) funcName(full string) string {
	name := full[strings.LastIndex(full, "/")+1:]
	name = strings.TrimPrefix(name, r.pkg+".")
	name = strings.NewReplacer("(*", "", ")", "").Replace(name)
	name = closureSuffix.ReplaceAllString(name, "")
	return outerFunc.ReplaceAllString(name, "")
}

// Site is a call, in the package's code, of a function that fills a
// statement's names in.
type Site struct {
	File, Func string
	From, To   int // the call's lines
}

// Sites lists the calls of methods named one of methods in the non-test
// Go files of the current directory, but for those in skipFiles.
func Sites(t *testing.T, methods []string, skipFiles ...string) []Site {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var sites []Site
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") || slices.Contains(skipFiles, path) {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil {
				recv := fd.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				name = recv.(*ast.Ident).Name + "." + name
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && slices.Contains(methods, sel.Sel.Name) {
					sites = append(sites, Site{File: path, Func: name,
						From: fset.Position(call.Pos()).Line, To: fset.Position(call.End()).Line})
				}
				return true
			})
		}
	}
	require.NotEmpty(t, sites)
	return sites
}

// Missing names the sites no recorded statement was run from.
func (r *Recorder) Missing(sites []Site) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var missing []string
	for _, s := range sites {
		if !slices.ContainsFunc(r.lines[s.File], func(l int) bool { return l >= s.From && l <= s.To }) {
			missing = append(missing, fmt.Sprintf("%s (%s:%d)", s.Func, s.File, s.From))
		}
	}
	return missing
}

// Check writes what was recorded under header (comment lines), function
// by function, and compares it with the file at path; update rewrites the
// file first. rerun is the command that rewrites it, for the failure's
// message.
func (r *Recorder) Check(t *testing.T, path, header, rerun string, update bool) {
	t.Helper()
	r.mu.Lock()
	var fns []string
	for fn := range r.byFunc {
		fns = append(fns, fn)
	}
	slices.Sort(fns)
	var b strings.Builder
	b.WriteString(header)
	for _, fn := range fns {
		for _, stmt := range r.byFunc[fn] {
			fmt.Fprintf(&b, "\n-- %s\n%s;\n", fn, stmt)
		}
	}
	r.mu.Unlock()
	if update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run %s", rerun)
	if b.String() != string(want) {
		t.Errorf("statements changed: run %s and read the diff", rerun)
	}
}
