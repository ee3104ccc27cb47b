// Apicheck guards the exported API of httpretry's public packages. It lists
// every exported name, in the style of the Go project's api/*.txt files,
// and compares the list with the one committed under api/.
//
//	go run ./scripts/apicheck        # CI: fail if the API differs from api/
//	go run ./scripts/apicheck -w     # rewrite api/ after a deliberate change
//
// An added name is compatible, but the committed list must be brought up to
// date (-w) so that the next change is compared with it. A removed or
// changed name, and a method added to an interface (which breaks the
// interface's implementations), is incompatible: each such line must be
// declared in api/except.txt, with the reason on the line above it, or the
// check fails and -w refuses to write. Every top-level name of the root
// package must also be named in docs/design.md's API table, with why.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// packages are the public packages whose API is a promise, by directory
// relative to the repository's root.
var packages = []string{".", "backoff", "chaos", "config", "httpretrytest", "otelhttpretry", "statuspage", "fleet", "fleet/fleettest"}

func main() {
	write := flag.Bool("w", false, "rewrite api/*.txt from the code")
	flag.Parse()
	root, err := repoRoot()
	if err != nil {
		fatal(err)
	}
	except, err := readLines(filepath.Join(root, "api", "except.txt"))
	if err != nil && !os.IsNotExist(err) {
		fatal(err)
	}
	failed := false
	for _, dir := range packages {
		name, lines, err := apiOf(filepath.Join(root, dir))
		if err != nil {
			fatal(err)
		}
		if dir == "." && !checkDesign(root, lines) {
			failed = true
		}
		file := filepath.Join(root, "api", name+".txt")
		old, err := readLines(file)
		if err != nil && !os.IsNotExist(err) {
			fatal(err)
		}
		added, removed := diff(old, lines)
		var undeclared []string
		for _, l := range removed {
			if !slices.Contains(except, l) {
				undeclared = append(undeclared, "removed or changed: "+l)
			}
		}
		for _, l := range added {
			if methodOfOldInterface(l, old) && !slices.Contains(except, l) {
				undeclared = append(undeclared, "method added to an interface: "+l)
			}
		}
		for _, l := range undeclared {
			fmt.Fprintf(os.Stderr, "apicheck: incompatible, not declared in api/except.txt: %s\n", l)
			failed = true
		}
		if *write {
			if len(undeclared) == 0 {
				if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					fatal(err)
				}
			}
			continue
		}
		for _, l := range added {
			fmt.Fprintf(os.Stderr, "apicheck: added, not in api/%s.txt (run go run ./scripts/apicheck -w): %s\n", name, l)
			failed = true
		}
		for _, l := range removed {
			if slices.Contains(except, l) {
				fmt.Fprintf(os.Stderr, "apicheck: removed as declared in api/except.txt, but api/%s.txt still lists it (run -w): %s\n", name, l)
				failed = true
			}
		}
	}
	if failed {
		os.Exit(1)
	}
	if !*write {
		fmt.Println("apicheck: the exported API matches api/")
	}
}

// methodOfOldInterface reports whether l, an added API line, is a method of
// an interface that old already lists: a method of a new interface breaks
// no implementation.
func methodOfOldInterface(l string, old []string) bool {
	i := strings.Index(l, " interface, ")
	return i >= 0 && slices.Contains(old, l[:i+len(" interface")])
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "apicheck:", err)
	os.Exit(2)
}

// repoRoot finds the directory holding api/ and the root go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "apicheck")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("run it inside the httpretry repository")
		}
		dir = parent
	}
}

func readLines(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines, sc.Err()
}

// diff returns the lines only in now (added) and only in old (removed).
func diff(old, now []string) (added, removed []string) {
	for _, l := range now {
		if !slices.Contains(old, l) {
			added = append(added, l)
		}
	}
	for _, l := range old {
		if !slices.Contains(now, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

// apiOf lists the exported API of the package in dir, sorted.
func apiOf(dir string) (string, []string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", nil, err
	}
	var files []*ast.File
	name := ""
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return "", nil, err
		}
		if f.Name.Name == "main" {
			continue
		}
		name = f.Name.Name
		files = append(files, f)
	}
	if name == "" {
		return "", nil, fmt.Errorf("no package in %s", dir)
	}
	w := &lister{fset: fset, prefix: "pkg " + name + ", "}
	for _, f := range files {
		for _, d := range f.Decls {
			w.decl(d)
		}
	}
	slices.Sort(w.lines)
	return name, slices.Compact(w.lines), nil
}

type lister struct {
	fset   *token.FileSet
	prefix string
	lines  []string
}

func (w *lister) add(format string, args ...any) {
	w.lines = append(w.lines, w.prefix+fmt.Sprintf(format, args...))
}

func (w *lister) expr(e ast.Expr) string {
	var b bytes.Buffer
	printer.Fprint(&b, w.fset, e)
	return strings.Join(strings.Fields(b.String()), " ")
}

func (w *lister) decl(d ast.Decl) {
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return
		}
		if d.Recv == nil {
			name := d.Name.Name
			if d.Type.TypeParams != nil {
				name += "[" + w.fields(d.Type.TypeParams, ", ") + "]"
			}
			w.add("func %s%s", name, w.signature(d.Type))
			return
		}
		recv := w.expr(d.Recv.List[0].Type)
		if !ast.IsExported(strings.TrimLeft(strings.SplitN(recv, "[", 2)[0], "*")) {
			return
		}
		w.add("method (%s) %s%s", recv, d.Name.Name, w.signature(d.Type))
	case *ast.GenDecl:
		// In a const group a spec without values repeats the type and
		// values of the last one that had them, with iota counting specs.
		var typ ast.Expr
		var values []ast.Expr
		for iota, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				w.typeSpec(s)
			case *ast.ValueSpec:
				if d.Tok == token.VAR {
					for _, n := range s.Names {
						if n.IsExported() && s.Type != nil {
							w.add("var %s %s", n.Name, w.expr(s.Type))
						} else if n.IsExported() {
							w.add("var %s", n.Name)
						}
					}
					continue
				}
				if len(s.Values) > 0 {
					typ, values = s.Type, s.Values
				}
				for i, n := range s.Names {
					if !n.IsExported() {
						continue
					}
					line := "const " + n.Name
					if typ != nil {
						line += " " + w.expr(typ)
					}
					if i < len(values) {
						v := w.expr(values[i])
						switch {
						case v == "iota":
							v = fmt.Sprint(iota)
						case strings.Contains(v, "iota"):
							v += fmt.Sprintf(" (iota %d)", iota)
						}
						line += " = " + v
					}
					w.add("%s", line)
				}
			}
		}
	}
}

func (w *lister) typeSpec(s *ast.TypeSpec) {
	if !s.Name.IsExported() {
		return
	}
	name := s.Name.Name
	if s.TypeParams != nil {
		name += "[" + w.fields(s.TypeParams, ", ") + "]"
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		w.add("type %s struct", name)
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 {
				w.add("type %s struct, embedded %s", name, w.expr(f.Type))
			}
			for _, n := range f.Names {
				if n.IsExported() {
					w.add("type %s struct, %s %s", name, n.Name, w.expr(f.Type))
				}
			}
		}
	case *ast.InterfaceType:
		w.add("type %s interface", name)
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if ft, ok := m.Type.(*ast.FuncType); ok {
					w.add("type %s interface, %s%s", name, n.Name, w.signature(ft))
				}
			}
			if len(m.Names) == 0 {
				w.add("type %s interface, embedded %s", name, w.expr(m.Type))
			}
		}
	default:
		if s.Assign.IsValid() {
			w.add("type %s = %s", name, w.expr(s.Type))
		} else {
			w.add("type %s %s", name, w.expr(s.Type))
		}
	}
}

// signature prints a function type without parameter names.
func (w *lister) signature(ft *ast.FuncType) string {
	s := "(" + w.types(ft.Params) + ")"
	if ft.Results != nil {
		r := w.types(ft.Results)
		if len(ft.Results.List) == 1 && len(ft.Results.List[0].Names) <= 1 && !strings.Contains(r, ",") {
			s += " " + r
		} else {
			s += " (" + r + ")"
		}
	}
	return s
}

// types lists the types of a field list, once per name.
func (w *lister) types(fl *ast.FieldList) string {
	if fl == nil {
		return ""
	}
	var out []string
	for _, f := range fl.List {
		n := max(len(f.Names), 1)
		for range n {
			out = append(out, w.expr(f.Type))
		}
	}
	return strings.Join(out, ", ")
}

// fields prints a type parameter list with its names.
func (w *lister) fields(fl *ast.FieldList, sep string) string {
	var out []string
	for _, f := range fl.List {
		var names []string
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
		out = append(out, strings.Join(names, ", ")+" "+w.expr(f.Type))
	}
	return strings.Join(out, sep)
}
