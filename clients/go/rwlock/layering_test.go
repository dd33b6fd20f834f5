package rwlock

// The package's files form no circle: a file uses the top-level names of
// files below it only (Go forbids cycles between packages; this holds its
// files to the same rule, as the module's tests/layering.rs does for src/).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func TestLayering(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	declaredIn := map[string]string{} // top-level name -> file
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[f] = file
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					declaredIn[d.Name.Name] = f
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						declaredIn[s.Name.Name] = f
					case *ast.ValueSpec:
						for _, n := range s.Names {
							declaredIn[n.Name] = f
						}
					}
				}
			}
		}
	}
	if len(parsed) == 0 {
		t.Fatal("no files")
	}
	uses := map[string]map[string]bool{}
	for f, file := range parsed {
		uses[f] = map[string]bool{}
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				// x.Name: Name is a field or method, not a top-level name.
				ast.Inspect(sel.X, func(m ast.Node) bool {
					if id, ok := m.(*ast.Ident); ok {
						if g := declaredIn[id.Name]; g != "" && g != f {
							uses[f][g] = true
						}
					}
					return true
				})
				return false
			}
			if id, ok := n.(*ast.Ident); ok {
				if g := declaredIn[id.Name]; g != "" && g != f {
					uses[f][g] = true
				}
			}
			return true
		})
	}
	// Depth-first search for a circle.
	state := map[string]int{} // 1: on the path, 2: done
	var path []string
	var visit func(f string)
	visit = func(f string) {
		state[f] = 1
		path = append(path, f)
		var next []string
		for g := range uses[f] {
			next = append(next, g)
		}
		sort.Strings(next)
		for _, g := range next {
			switch state[g] {
			case 1:
				i := 0
				for path[i] != g {
					i++
				}
				t.Errorf("files in a circle: %s -> %s", strings.Join(path[i:], " -> "), g)
			case 0:
				visit(g)
			}
		}
		path = path[:len(path)-1]
		state[f] = 2
	}
	var names []string
	for f := range parsed {
		names = append(names, f)
	}
	sort.Strings(names)
	for _, f := range names {
		if state[f] == 0 {
			visit(f)
		}
	}
	if testing.Verbose() {
		for _, f := range names {
			var deps []string
			for g := range uses[f] {
				deps = append(deps, g)
			}
			sort.Strings(deps)
			t.Logf("%s uses %s", f, strings.Join(deps, ", "))
		}
	}
	// The package is one directory: no subpackages to form circles.
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if matches, _ := filepath.Glob(filepath.Join(e.Name(), "*.go")); len(matches) > 0 {
				t.Errorf("subpackage %s: extend this check to packages", e.Name())
			}
		}
	}
}
