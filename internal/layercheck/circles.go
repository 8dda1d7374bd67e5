package main

import (
	"fmt"
	"sort"
	"strings"
)

// circle is one folder's parts that import each other, and the package
// imports that make them do so.
type circle struct {
	folder  string   // relative to the repository; "" is the root
	parts   []string // the folder's own package, subfolders with a slash
	imports []string // "a -> b", package paths relative to the repository
}

func (c circle) String() string {
	name := c.folder + "/"
	if c.folder == "" {
		name = "the repository's root"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s import each other:", name, strings.Join(c.parts, ", "))
	for _, imp := range c.imports {
		b.WriteString("\n\t" + imp)
	}
	return b.String()
}

// findCircles returns, folder by folder, every set of a folder's parts
// that import each other in a circle, given each package's imports of
// the repository's packages (paths relative to the repository, "" for a
// package at its root). A folder's parts are its own package and each
// of its subfolders with everything below it: an import from a to b
// counts as one between the parts of the deepest folder that holds
// both.
func findCircles(imports map[string][]string) []circle {
	// folder -> part -> part -> the package imports behind the arrow
	arrows := map[string]map[string]map[string][]string{}
	for a, imps := range imports {
		for _, b := range imps {
			if a == b {
				continue
			}
			folder := commonFolder(a, b)
			from, to := part(folder, a), part(folder, b)
			if arrows[folder] == nil {
				arrows[folder] = map[string]map[string][]string{}
			}
			if arrows[folder][from] == nil {
				arrows[folder][from] = map[string][]string{}
			}
			arrows[folder][from][to] = append(arrows[folder][from][to], show(a)+" -> "+show(b))
		}
	}
	var circles []circle
	for folder, g := range arrows {
		for _, comp := range components(g) {
			if len(comp) < 2 {
				continue
			}
			in := map[string]bool{}
			for _, p := range comp {
				in[p] = true
			}
			c := circle{folder: folder}
			for _, p := range comp {
				c.parts = append(c.parts, partName(folder, p))
				for to, imps := range g[p] {
					if in[to] {
						c.imports = append(c.imports, imps...)
					}
				}
			}
			sort.Strings(c.parts)
			sort.Strings(c.imports)
			circles = append(circles, c)
		}
	}
	sort.Slice(circles, func(i, j int) bool {
		if circles[i].folder != circles[j].folder {
			return circles[i].folder < circles[j].folder
		}
		return circles[i].parts[0] < circles[j].parts[0]
	})
	return circles
}

// commonFolder is the deepest folder that holds both packages (a
// package's folder holds the package).
func commonFolder(a, b string) string {
	as, bs := split(a), split(b)
	n := 0
	for n < len(as) && n < len(bs) && as[n] == bs[n] {
		n++
	}
	return strings.Join(as[:n], "/")
}

// part is the part of folder that holds pkg: "." for the folder's own
// package, else the name of the subfolder that pkg is in or under.
func part(folder, pkg string) string {
	if pkg == folder {
		return "."
	}
	return split(pkg)[len(split(folder))]
}

// partName names a part for a reader: the folder's own package by its
// path, a subfolder by its path and a slash.
func partName(folder, p string) string {
	if p == "." {
		return show(folder)
	}
	if folder == "" {
		return p + "/"
	}
	return folder + "/" + p + "/"
}

// show names a package for a reader; the root's is the module path.
func show(pkg string) string {
	if pkg == "" {
		return modulePath
	}
	return pkg
}

func split(pkg string) []string {
	if pkg == "" {
		return nil
	}
	return strings.Split(pkg, "/")
}

// components returns the strongly connected components of g (Tarjan's
// algorithm), each sorted, in an order fixed by the names.
func components(g map[string]map[string][]string) [][]string {
	var nodes []string
	seen := map[string]bool{}
	for from, tos := range g {
		if !seen[from] {
			seen[from] = true
			nodes = append(nodes, from)
		}
		for to := range tos {
			if !seen[to] {
				seen[to] = true
				nodes = append(nodes, to)
			}
		}
	}
	sort.Strings(nodes)
	index := map[string]int{}
	low := map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var comps [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v] = len(index)
		low[v] = index[v]
		stack = append(stack, v)
		onStack[v] = true
		var succ []string
		for w := range g[v] {
			succ = append(succ, w)
		}
		sort.Strings(succ)
		for _, w := range succ {
			if _, ok := index[w]; !ok {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			sort.Strings(comp)
			comps = append(comps, comp)
		}
	}
	for _, v := range nodes {
		if _, ok := index[v]; !ok {
			visit(v)
		}
	}
	return comps
}
