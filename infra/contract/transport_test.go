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

// TestNoRequestGoesThroughTheSharedDefaultTransport: httptest.Server.Close
// closes the idle connections of the process-wide http.DefaultTransport,
// and a request on that transport in another test at that moment fails
// with "http: CloseIdleConnections called" (make test failed so, once, in
// infra/local/functionurl). Anything else in a process that calls it does
// the same to every client on it. So no code here, test or not, sends
// through it: no http.DefaultClient or http.DefaultTransport (a Clone of
// it, a transport of one's own, is what to use), no http.Get, Head, Post
// or PostForm, no http.Client or httputil reverse proxy without a
// Transport, no go-github client made with a nil one. Each use fails here,
// naming the place.
func TestNoRequestGoesThroughTheSharedDefaultTransport(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// testdata holds programs of their own (infra/local/rie's
			// echofn), run as separate processes; .build the tools make
			// builds.
			if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, msg := range sharedTransportUses(fset, f) {
			t.Error(msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("walked %d Go files from %s: the check looked at the wrong tree", files, root)
	}
}

// sharedTransportUses lists each place in f that sends, or may send,
// through http.DefaultTransport.
func sharedTransportUses(fset *token.FileSet, f *ast.File) []string {
	httpName, utilName, githubName := "", "", ""
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		switch {
		case p == "net/http":
			httpName = name
		case p == "net/http/httputil":
			utilName = name
		case strings.HasPrefix(p, "github.com/google/go-github/") && strings.HasSuffix(p, "/github"):
			githubName = name
		}
	}
	if httpName == "" && utilName == "" && githubName == "" {
		return nil
	}
	is := func(e ast.Expr, pkg string, names ...string) bool {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok || pkg == "" {
			return false
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok || x.Name != pkg {
			return false
		}
		for _, n := range names {
			if sel.Sel.Name == n {
				return true
			}
		}
		return false
	}
	// http.DefaultTransport.(*http.Transport).Clone() is a transport of
	// one's own: the selector inside it is allowed.
	// A reverse proxy made by NewSingleHostReverseProxy into a variable
	// is given its transport by an assignment to the variable's Transport.
	cloned := map[ast.Expr]bool{}
	proxies := map[string]ast.Node{}
	transportSet := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
			if call, ok := as.Rhs[0].(*ast.CallExpr); ok && is(call.Fun, utilName, "NewSingleHostReverseProxy") {
				if id, ok := as.Lhs[0].(*ast.Ident); ok {
					proxies[id.Name] = call
				}
			}
			if sel, ok := as.Lhs[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "Transport" {
				if id, ok := sel.X.(*ast.Ident); ok {
					transportSet[id.Name] = true
				}
			}
		}
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Clone" {
				if ta, ok := sel.X.(*ast.TypeAssertExpr); ok && is(ta.X, httpName, "DefaultTransport") {
					cloned[ta.X] = true
				}
			}
		}
		return true
	})
	var out []string
	report := func(n ast.Node, msg string) {
		out = append(out, fset.Position(n.Pos()).String()+": "+msg)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			switch {
			case is(n, httpName, "DefaultClient"):
				report(n, "http.DefaultClient sends through the shared http.DefaultTransport: use a client with a transport of its own")
			case is(n, httpName, "DefaultTransport") && !cloned[n]:
				report(n, "http.DefaultTransport is shared by the whole process: use http.DefaultTransport.(*http.Transport).Clone()")
			}
		case *ast.CallExpr:
			switch {
			case is(n.Fun, httpName, "Get", "Head", "Post", "PostForm"):
				report(n, "http."+n.Fun.(*ast.SelectorExpr).Sel.Name+" sends through http.DefaultClient: use a client with a transport of its own")
			case is(n.Fun, githubName, "NewClient") && len(n.Args) == 1 && isNil(n.Args[0]):
				report(n, "github.NewClient(nil) sends through http.DefaultTransport: pass a client with a transport of its own")
			}
		case *ast.CompositeLit:
			if is(n.Type, httpName, "Client") && !hasKey(n, "Transport") {
				report(n, "an http.Client without a Transport sends through http.DefaultTransport: set one of its own")
			}
			if is(n.Type, utilName, "ReverseProxy") && !hasKey(n, "Transport") {
				report(n, "an httputil.ReverseProxy without a Transport forwards through http.DefaultTransport: set one of its own")
			}
		}
		return true
	})
	for name, call := range proxies {
		if !transportSet[name] {
			report(call, "the reverse proxy in "+name+" forwards through http.DefaultTransport: set "+name+".Transport")
		}
	}
	return out
}

func isNil(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == "nil"
}

func hasKey(lit *ast.CompositeLit, key string) bool {
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			if id, ok := kv.Key.(*ast.Ident); ok && id.Name == key {
				return true
			}
		}
	}
	return false
}

// TestSharedTransportUsesFindsEachForm: the check above finds every form
// of sending through http.DefaultTransport, under any import name, and
// lets a transport of one's own through.
func TestSharedTransportUsesFindsEachForm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       int
	}{
		{"DefaultClient", `_ = http.DefaultClient`, 1},
		{"DefaultTransport", `var rt http.RoundTripper = http.DefaultTransport; _ = rt`, 1},
		{"DefaultTransport asserted, not cloned", `_ = http.DefaultTransport.(*http.Transport)`, 1},
		{"a clone", `_ = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}`, 0},
		{"package functions", `http.Get("u"); http.Head("u"); http.Post("u", "", nil); http.PostForm("u", nil)`, 4},
		{"a client's methods", `c := &http.Client{Transport: &http.Transport{}}; c.Get("u"); c.Post("u", "", nil)`, 0},
		{"a client without a Transport", `_ = &http.Client{Timeout: 1}; _ = http.Client{}`, 2},
		{"go-github on nil", `_ = github.NewClient(nil)`, 1},
		{"go-github on a client", `_ = github.NewClient(&http.Client{Transport: &http.Transport{}})`, 0},
		{"a reverse proxy left on the default", `rp := httputil.NewSingleHostReverseProxy(nil); _ = rp`, 1},
		{"a reverse proxy given one", `rp := httputil.NewSingleHostReverseProxy(nil); rp.Transport = &http.Transport{}`, 0},
		{"a ReverseProxy literal", `_ = &httputil.ReverseProxy{}; _ = &httputil.ReverseProxy{Transport: &http.Transport{}}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := "package p\n\nimport (\n\t\"net/http\"\n\t\"net/http/httputil\"\n\n\t\"github.com/google/go-github/v62/github\"\n)\n\n" +
				"var _, _, _ = http.MethodGet, httputil.DumpRequest, github.String\n\nfunc f() {\n\t" + tc.body + "\n}\n"
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if got := sharedTransportUses(fset, f); len(got) != tc.want {
				t.Errorf("found %d, want %d: %q", len(got), tc.want, got)
			}
		})
	}
	t.Run("another import name", func(t *testing.T) {
		t.Parallel()
		src := "package p\n\nimport nethttp \"net/http\"\n\nvar _ = nethttp.DefaultClient\nvar http struct{ DefaultClient int }\nvar _ = http.DefaultClient\n"
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if got := sharedTransportUses(fset, f); len(got) != 1 || !strings.Contains(got[0], "p.go:5:") {
			t.Errorf("got %q, want the one on line 5 (nethttp is net/http; http is a variable)", got)
		}
	})
}
