package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOneClockAndOneRandomness: what the functions ship takes time from
// shared/clock's one clock type and randomness from shared/random's one
// source type (issue 11: one of each for the whole tree), so every
// component is driven by the same injected clock and seeded source in
// tests. A field or parameter typed func() time.Time, or an import of
// math/rand, outside those two packages fails here, naming the place.
func TestOneClockAndOneRandomness(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..", "shared")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		pkg := filepath.Base(filepath.Dir(path))
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if (p == "math/rand" || p == "math/rand/v2") && pkg != "random" {
				t.Errorf("%s imports %s: take a random.Source", fset.Position(imp.Pos()), p)
			}
		}
		if pkg == "clock" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if fl, ok := n.(*ast.Field); ok && isClockFunc(fl.Type) {
				t.Errorf("%s: a func() time.Time; use clock.Func", fset.Position(fl.Pos()))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isClockFunc reports whether e is the type func() time.Time.
func isClockFunc(e ast.Expr) bool {
	ft, ok := e.(*ast.FuncType)
	if !ok || ft.Params.NumFields() != 0 || ft.Results.NumFields() != 1 {
		return false
	}
	sel, ok := ft.Results.List[0].Type.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == "time" && sel.Sel.Name == "Time"
}
