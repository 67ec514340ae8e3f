package bench

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ServerRaft is what server/node.go's startRaft does to raft, read from its
// source, so that the bare-raft baseline runs on fencerd's settings as they
// are in the tree being measured, not as someone remembered them.
type ServerRaft struct {
	// Config is every raft.Config field startRaft assigns (LocalID and
	// Logger aside), in order, as "Field=value": value is a literal (true,
	// 64, 10s) or "cfg.Name", a field of the node's server.Config, which
	// fencerd leaves at server.DefaultConfig()'s value unless a flag says
	// otherwise.
	Config []string
	// LogCache is the raft.NewLogCache size; 0 if there is none.
	LogCache int
	// TransportPool and TransportTimeout are the TCP transport's maxPool
	// and timeout.
	TransportPool    int
	TransportTimeout time.Duration
	// NoSync is raftboltdb.Options.NoSync.
	NoSync bool
}

// Args are the raftbench flags that reproduce s.
func (s ServerRaft) Args() []string {
	args := []string{"--log-cache", strconv.Itoa(s.LogCache)}
	for _, c := range s.Config {
		args = append(args, "--raft-set", c)
	}
	return args
}

// ReadServerRaft parses the non-test Go files of the server package in dir
// and reads startRaft. It fails on anything it cannot evaluate, so that a
// baseline never runs on guessed settings.
func ReadServerRaft(dir string) (ServerRaft, error) {
	var s ServerRaft
	entries, err := os.ReadDir(dir)
	if err != nil {
		return s, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			return s, err
		}
		files = append(files, f)
	}
	consts := constValues(files)
	var start *ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == "startRaft" && fd.Body != nil {
				start = fd
			}
		}
	}
	if start == nil {
		return s, fmt.Errorf("no startRaft in %s", dir)
	}
	var errs []string
	eval := func(what string, e ast.Expr) string {
		v, ok := exprValue(e, consts)
		if !ok {
			errs = append(errs, fmt.Sprintf("%s: cannot evaluate %s", what, render(fset, e)))
		}
		return v
	}
	var sawCache, sawTransport bool
	ast.Inspect(start.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			for i, lhs := range n.Lhs {
				sel, ok := lhs.(*ast.SelectorExpr)
				if !ok || i >= len(n.Rhs) || len(n.Lhs) != len(n.Rhs) {
					continue
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "rc" {
					continue
				}
				switch sel.Sel.Name {
				case "LocalID", "Logger": // per node; log output
				default:
					s.Config = append(s.Config, sel.Sel.Name+"="+eval("rc."+sel.Sel.Name, n.Rhs[i]))
				}
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch sel.Sel.Name {
			case "NewLogCache":
				sawCache = true
				v, err := strconv.Atoi(eval("NewLogCache size", n.Args[0]))
				if err == nil {
					s.LogCache = v
				}
			case "NewTCPTransportWithLogger", "NewNetworkTransportWithLogger":
				if len(n.Args) < 3 {
					return true
				}
				pool, err1 := strconv.Atoi(eval("transport pool", n.Args[len(n.Args)-3]))
				timeout, err2 := time.ParseDuration(eval("transport timeout", n.Args[len(n.Args)-2]))
				if err1 != nil || err2 != nil {
					return true
				}
				if sawTransport && (pool != s.TransportPool || timeout != s.TransportTimeout) {
					errs = append(errs, "the TCP and TLS transports differ in pool or timeout")
				}
				sawTransport, s.TransportPool, s.TransportTimeout = true, pool, timeout
			}
		case *ast.CompositeLit:
			sel, ok := n.Type.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Options" {
				return true
			}
			for _, el := range n.Elts {
				kv, ok := el.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "NoSync" {
					s.NoSync = eval("NoSync", kv.Value) == "true"
				}
			}
		}
		return true
	})
	if !sawCache {
		errs = append(errs, "no raft.NewLogCache call")
	}
	if !sawTransport {
		errs = append(errs, "no TCP transport")
	}
	if len(errs) > 0 {
		return s, fmt.Errorf("reading startRaft in %s: %s", dir, strings.Join(errs, "; "))
	}
	return s, nil
}

// constValues maps the package-level constants to their expressions.
func constValues(files []*ast.File) map[string]ast.Expr {
	m := map[string]ast.Expr{}
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						m[name.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	return m
}

// exprValue renders an integer or string literal, true or false, a
// package constant, N*time.Unit as a duration, or cfg.Field as itself.
func exprValue(e ast.Expr, consts map[string]ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.INT {
			return e.Value, true
		}
	case *ast.Ident:
		if e.Name == "true" || e.Name == "false" {
			return e.Name, true
		}
		if v, ok := consts[e.Name]; ok {
			return exprValue(v, consts)
		}
	case *ast.ParenExpr:
		return exprValue(e.X, consts)
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			switch {
			case x.Name == "cfg":
				return "cfg." + e.Sel.Name, true
			case x.Name == "time":
				if u, ok := timeUnits[e.Sel.Name]; ok {
					return u.String(), true
				}
			}
		}
	case *ast.BinaryExpr:
		if e.Op != token.MUL {
			break
		}
		a, ok1 := exprValue(e.X, consts)
		b, ok2 := exprValue(e.Y, consts)
		n, err1 := strconv.ParseInt(a, 10, 64)
		u, err2 := time.ParseDuration(b)
		if ok1 && ok2 && err1 == nil && err2 == nil {
			return (time.Duration(n) * u).String(), true
		}
	}
	return "", false
}

var timeUnits = map[string]time.Duration{
	"Nanosecond": time.Nanosecond, "Microsecond": time.Microsecond, "Millisecond": time.Millisecond,
	"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour,
}

func render(fset *token.FileSet, e ast.Expr) string {
	p := fset.Position(e.Pos())
	return fmt.Sprintf("the expression at %s:%d", filepath.Base(p.Filename), p.Line)
}
