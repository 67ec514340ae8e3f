package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSettingsMirrorServer reads server/'s source and fails when fencerd's
// raft settings differ from the baseline's: the overhead ratio is only
// meaningful on the same settings. When it fails, change defaultSettings
// (or the constants in settings.go) to match startRaft.
func TestSettingsMirrorServer(t *testing.T) {
	fset := token.NewFileSet()
	dir := filepath.Join("..", "..", "..", "server")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	consts := constValues(files)
	eval := func(e ast.Expr) string { return exprValue(e, consts) }

	s := defaultSettings()
	// Fields of the raft.Config that startRaft sets, and what the baseline
	// does with each.
	handled := map[string]func(value string){
		"LocalID":           nil, // per node
		"Logger":            nil, // log output only
		"SnapshotThreshold": nil, // from server.DefaultConfig(), see defaultSettings
		"SnapshotInterval":  nil,
		"BatchApplyCh": func(v string) {
			if v != strconv.FormatBool(s.BatchApplyCh) {
				t.Errorf("startRaft sets BatchApplyCh = %s; the baseline uses %v", v, s.BatchApplyCh)
			}
		},
		"MaxAppendEntries": func(v string) {
			if v != strconv.Itoa(s.MaxAppendEntries) {
				t.Errorf("startRaft sets MaxAppendEntries = %s; the baseline uses %d", v, s.MaxAppendEntries)
			}
		},
	}
	var sawStart, sawCache, sawTransport bool
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			fd, ok := n.(*ast.FuncDecl)
			if !ok || fd.Name.Name != "startRaft" {
				return true
			}
			sawStart = true
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					for i, lhs := range n.Lhs {
						sel, ok := lhs.(*ast.SelectorExpr)
						if !ok || i >= len(n.Rhs) {
							continue
						}
						if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "rc" {
							continue
						}
						check, known := handled[sel.Sel.Name]
						if !known {
							t.Errorf("startRaft sets raft Config.%s, which the baseline does not mirror", sel.Sel.Name)
						} else if check != nil {
							check(eval(n.Rhs[i]))
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
						if got := eval(n.Args[0]); got != strconv.Itoa(logCacheSize) {
							t.Errorf("startRaft's LogCache holds %s entries; the baseline's %d", got, logCacheSize)
						}
					case "NewTCPTransportWithLogger", "NewNetworkTransportWithLogger":
						sawTransport = true
						pool, timeout := eval(n.Args[len(n.Args)-3]), eval(n.Args[len(n.Args)-2])
						if pool != strconv.Itoa(transportPool) || timeout != transportTimeout.String() {
							t.Errorf("startRaft's transport has pool %s, timeout %s; the baseline's %d, %v", pool, timeout, transportPool, transportTimeout)
						}
					case "Options":
						// raftboltdb.Options{...} is a composite literal, below.
					}
				case *ast.CompositeLit:
					sel, ok := n.Type.(*ast.SelectorExpr)
					if !ok || sel.Sel.Name != "Options" {
						return true
					}
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "NoSync" && eval(kv.Value) != "false" {
								t.Errorf("startRaft opens its store with NoSync = %s; the baseline syncs", eval(kv.Value))
							}
						}
					}
				}
				return true
			})
			return false
		})
	}
	if t.Failed() {
		t.Log("the bare-raft baseline of make bench must run on fencerd's raft settings: change defaultSettings or the constants in internal/cmd/raftbench/settings.go to match server/node.go's startRaft")
	}
	if !sawStart || !sawCache || !sawTransport {
		t.Errorf("did not find startRaft (%v), its NewLogCache (%v) and its transport (%v) in %s; update this test",
			sawStart, sawCache, sawTransport, dir)
	}
}

// constValues maps the package-level constants that are plain literals to
// their text.
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

// exprValue renders a literal, a constant, true/false or N*time.Unit as
// the text the baseline's values print as.
func exprValue(e ast.Expr, consts map[string]ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Value
	case *ast.Ident:
		if v, ok := consts[e.Name]; ok {
			return exprValue(v, consts)
		}
		return e.Name
	case *ast.ParenExpr:
		return exprValue(e.X, consts)
	case *ast.BinaryExpr:
		if e.Op != token.MUL {
			break
		}
		n, err := strconv.Atoi(exprValue(e.X, consts))
		unit, ok := e.Y.(*ast.SelectorExpr)
		if err != nil || !ok {
			break
		}
		units := map[string]time.Duration{"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute}
		if u, ok := units[unit.Sel.Name]; ok {
			return (time.Duration(n) * u).String()
		}
	}
	return "?"
}
