package redisbridge

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/fencerlock/fencer/wire"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// faultyLocker fails every call with err. It stands in for the node only
// because a real node cannot lose leadership mid-commit, or time out with an
// entry in flight, on demand; the reply mapping is what is under test.
type faultyLocker struct{ err error }

func (f faultyLocker) Acquire(context.Context, string, string, time.Duration, time.Duration) (server.Grant, bool, error) {
	return server.Grant{}, false, f.err
}
func (f faultyLocker) Extend(context.Context, string, string, time.Duration) (bool, error) {
	return false, f.err
}
func (f faultyLocker) Release(context.Context, string, string) (bool, error) { return false, f.err }
func (f faultyLocker) Revoke(context.Context, string) (bool, error)          { return false, f.err }
func (f faultyLocker) Status(context.Context, string) (server.Status, bool, error) {
	return server.Status{}, false, f.err
}
func (f faultyLocker) Leader() (string, string) { return "", "" }
func (f faultyLocker) OpenSession(context.Context, time.Duration, string) (uint64, error) {
	return 0, f.err
}
func (f faultyLocker) SessionUser(context.Context, uint64) (string, bool, error) {
	return "", false, f.err
}
func (f faultyLocker) KeepAlive(context.Context, uint64) (uint64, bool, error) {
	return 0, false, f.err
}
func (f faultyLocker) CloseSession(context.Context, uint64) (bool, error)  { return false, f.err }
func (f faultyLocker) RevokeSession(context.Context, uint64) (bool, error) { return false, f.err }
func (f faultyLocker) Session(context.Context, uint64) (server.SessionStatus, bool, error) {
	return server.SessionStatus{}, false, f.err
}
func (f faultyLocker) AcquireInSession(context.Context, uint64, string, string, string, time.Duration) (server.Grant, bool, error) {
	return server.Grant{}, false, f.err
}
func (f faultyLocker) ReleaseInSession(context.Context, uint64, string, string) (bool, error) {
	return false, f.err
}
func (f faultyLocker) Proclaim(context.Context, uint64, string, string, string) (bool, error) {
	return false, f.err
}
func (f faultyLocker) AcquireShared(context.Context, server.SharedAcquire) (server.Grant, bool, error) {
	return server.Grant{}, false, f.err
}
func (f faultyLocker) Holders(context.Context, string) ([]server.Holding, error) { return nil, f.err }
func (f faultyLocker) AcquireMany(context.Context, server.MultiAcquire) (server.Grant, bool, error) {
	return server.Grant{}, false, f.err
}
func (f faultyLocker) ExtendMany(context.Context, []string, string, time.Duration) (int, error) {
	return 0, f.err
}
func (f faultyLocker) ReleaseMany(context.Context, []string, string, uint64) (int, error) {
	return 0, f.err
}
func (f faultyLocker) Progress() server.Progress                                 { return server.Progress{} }
func (f faultyLocker) RecordProgress(string, time.Time, server.Progress, string) {}
func (f faultyLocker) MemberHealth(context.Context, string) ([]server.MemberHealth, error) {
	return nil, f.err
}
func (f faultyLocker) HealthLimits() (time.Duration, uint64) { return time.Second, 1 }
func (f faultyLocker) FormingReport() server.FormingReport   { return server.FormingReport{} }
func (f faultyLocker) Locks(context.Context, server.LockQuery) (server.LockPage, error) {
	return server.LockPage{}, f.err
}
func (f faultyLocker) Sessions(context.Context, uint64, int, string) (server.SessionPage, error) {
	return server.SessionPage{}, f.err
}

// serveLocker serves a bridge over l on a loopback port until the test ends
// and returns a client of it.
func serveLocker(t *testing.T, l Locker, cfg Config) *redis.Client {
	t.Helper()
	b, err := New(l, cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.Serve(ln) }()
	t.Cleanup(func() { _ = b.Close() })
	return newClient(t, ln.Addr().String())
}

func TestServerErrorsHaveDistinctReplies(t *testing.T) {
	cases := []struct {
		err    error
		prefix string
	}{
		{fmt.Errorf("%w: leadership lost while the command was in flight", server.ErrUnknownOutcome), "UNCERTAIN "},
		{fmt.Errorf("%w: %v", server.ErrUnknownOutcome, context.DeadlineExceeded), "UNCERTAIN "},
		{server.ErrNoLeader, "NOLEADER "},
		{&server.NotLeaderError{Leader: "n2"}, "NOTLEADER n2 - "},
		{server.ErrShutdown, "SHUTDOWN "},
		{fmt.Errorf("%w: its keys changed under it 16 times", server.ErrConflict), "TIMEOUT "},
		{fmt.Errorf("withdrawn unsent: %w", context.DeadlineExceeded), "TIMEOUT "},
	}
	for _, tc := range cases {
		t.Run(tc.prefix, func(t *testing.T) {
			c := serveLocker(t, faultyLocker{tc.err}, quietConfig(time.Second))
			for _, args := range [][]any{
				{"FENCE.ACQUIRE", "k", "o", 1000},
				{"FENCE.EXTEND", "k", "o", 1000},
				{"FENCE.RELEASE", "k", "o"},
				{"FENCE.STATUS", "k"},
				{"FENCE.CHECK", "k", 1},
				{"SET", "k", "v", "NX", "PX", 1000},
				{"SETNX", "k", "v"},
				{"GET", "k"},
				{"DEL", "k"},
				{"PEXPIRE", "k", 1000},
				{"EXISTS", "k", "k2"},
				{"HGET", "k", "o:1"},
				{"EVAL", redsyncDelete412, 1, "k", "v"},
				{"EVAL", redsyncTouchSetNX, 1, "k", "v", 1000},
				{"EVAL", redlockAcquire5, 2, "k", "k2", "v", 1000},
				{"EVAL", redisPyExtend35, 1, "k", "v", 1000, "0"},
				{"EVAL", redissonLock319, 1, "k", 30000, "o:1"},
				{"EVAL", redissonUnlock324, 3, "k", "ch", "latch", 0, 30000, "o:1", "publish", 7500},
			} {
				_, err := do(t, c, args...)
				require.Error(t, err, "%v", args)
				assert.Regexp(t, "^"+tc.prefix, err.Error(), "%v: never a null or 0 for an unknown outcome", args)
			}
		})
	}
}

func (f faultyLocker) Members(context.Context) ([]server.Member, error) { return nil, f.err }
func (f faultyLocker) PeerAddrs() []string                              { return nil }
func (f faultyLocker) DefaultLockTTL() time.Duration                    { return 30 * time.Second }
func (f faultyLocker) JoinReading(context.Context, string, string, string, uint64) error {
	return f.err
}
func (f faultyLocker) FormatInUse() uint64                                            { return 0 }
func (f faultyLocker) Remove(context.Context, string) error                           { return f.err }
func (f faultyLocker) TransferLeadership(context.Context, string) error               { return f.err }
func (f faultyLocker) StateHash() (uint64, string)                                    { return 0, "" }
func (f faultyLocker) SnapshotTable(context.Context) ([]byte, error)                  { return nil, f.err }
func (f faultyLocker) Watch(string, uint64, bool) (*server.Watch, error)              { return nil, f.err }
func (f faultyLocker) WatchPrefix(string, uint64, bool) (*server.Watch, error)        { return nil, f.err }
func (f faultyLocker) Update(context.Context, []string, func(*server.Tx) error) error { return f.err }
func (f faultyLocker) ID() string                                                     { return "faulty" }
func (f faultyLocker) ClusterID() string                                              { return "" }

// unsureLocker's first acquire ends with an unknown outcome; each later one
// waits for its context to end and fails with the context's error, as the
// node does for a command withdrawn from its queue. A stand-in because a
// real node cannot lose leadership mid-commit on demand.
type unsureLocker struct {
	faultyLocker
	mu    sync.Mutex
	calls int
}

func (u *unsureLocker) Acquire(ctx context.Context, _, _ string, _, _ time.Duration) (server.Grant, bool, error) {
	u.mu.Lock()
	u.calls++
	first := u.calls == 1
	u.mu.Unlock()
	if first {
		return server.Grant{}, false, fmt.Errorf("%w: leadership lost while the command was in flight", server.ErrUnknownOutcome)
	}
	<-ctx.Done()
	return server.Grant{}, false, ctx.Err()
}

// A waiting acquire whose earlier attempt may have been granted ends in
// UNCERTAIN when a later attempt runs out of time, not in TIMEOUT.
func TestWaitKeepsAnEarlierUnknownOutcome(t *testing.T) {
	l := &unsureLocker{faultyLocker: faultyLocker{server.ErrShutdown}}
	c := serveLocker(t, l, quietConfig(100*time.Millisecond))
	_, err := do(t, c, "FENCE.ACQUIRE", "k", "o", 1000, "WAIT", 1000)
	require.Error(t, err)
	assert.Regexp(t, "^UNCERTAIN ", err.Error())
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.Equal(t, 2, l.calls, "a second attempt ran")
}

// Every error of the node becomes a reply whose code is one of wire's, and
// says what it should: the table must name every exported error of package
// server (found in its source), so that a new one cannot go unmapped.
func TestReplyOfEveryServerError(t *testing.T) {
	deadline := context.DeadlineExceeded
	cases := []struct {
		name string // the server's error this case covers, if any
		err  error
		want wire.Code
	}{
		{"ErrInvalidArgument", fmt.Errorf("%w: empty key", server.ErrInvalidArgument), wire.Err},
		{"ArgumentError", &server.ArgumentError{Arg: "wait", Reason: "1h0m0s is outside 0s..1m0s"}, wire.Err},
		{"ErrNoLeader", server.ErrNoLeader, wire.NoLeader},
		{"ErrNoLeader", fmt.Errorf("%w: %v", server.ErrNoLeader, deadline), wire.NoLeader},
		{"ErrNotLeader", server.ErrNotLeader, wire.NotLeader},
		{"NotLeaderError", &server.NotLeaderError{Leader: "n2", LeaderAddr: "127.0.0.1:7379"}, wire.NotLeader},
		{"NotLeaderError", &server.NotLeaderError{Leader: "n2"}, wire.NotLeader},
		{"NotLeaderError", &server.NotLeaderError{}, wire.NotLeader},
		{"NotLeaderError", fmt.Errorf("wrapped: %w", &server.NotLeaderError{Leader: "n 2", LeaderAddr: "[::1]:7379"}), wire.NotLeader},
		{"ErrUnknownOutcome", fmt.Errorf("%w: %v", server.ErrUnknownOutcome, deadline), wire.Uncertain},
		{"ErrUnknownOutcome", fmt.Errorf("%w: %w", server.ErrUnknownOutcome, server.ErrShutdown), wire.Uncertain},
		{"ErrNotMember", server.ErrNotMember, wire.NoLeader},
		{"ErrUnknownMember", fmt.Errorf("%w: %q", server.ErrUnknownMember, "n9"), wire.Err},
		{"ErrLeaseLost", fmt.Errorf("%w: o held only some of the keys", server.ErrLeaseLost), wire.LeaseLost},
		{"ErrTransferRefused", fmt.Errorf("%w: %q is not a voter", server.ErrTransferRefused, "n9"), wire.Err},
		{"ErrDataDirInUse", server.ErrDataDirInUse, wire.Err},
		{"ErrLostMember", server.ErrLostMember, wire.Err},
		{"ErrTwoClusters", server.ErrTwoClusters, wire.Err},
		{"ErrFormatRefused", fmt.Errorf("%w: %q reads format levels up to 0, and the cluster is at format level 1", server.ErrFormatRefused, "n3"), wire.Err},
		{"ErrUnreadableFormat", fmt.Errorf("%w: the log entry at index 8 raises the cluster's format level to 2", server.ErrUnreadableFormat), wire.Err},
		{"ErrShutdown", server.ErrShutdown, wire.Shutdown},
		{"ErrNotReady", fmt.Errorf("%w: no leader known", server.ErrNotReady), wire.Err},
		{"ErrRestoreNotNew", server.ErrRestoreNotNew, wire.Err},
		{"ErrConflict", fmt.Errorf("%w: its keys changed under it 16 times", server.ErrConflict), wire.Timeout},
		{"ErrWrongType", server.ErrWrongType, wire.WrongType},
		{"ErrNoSession", server.ErrNoSession, wire.NoSession},
		{"ErrLimit", fmt.Errorf("%w: the lock table holds its maximum of 3 locks", server.ErrLimit), wire.Err},
		{"ErrDamaged", server.ErrDamaged, wire.Err},
		// A configuration is checked at start, never in a request; were one
		// answered, it is the request's error.
		{"ConfigError", &server.ConfigError{Pkg: "server", Field: "MinTTL", Reason: "must be positive"}, wire.Err},
		// A deadline that passed before anything was proposed is TIMEOUT,
		// however it is wrapped; a hang-up or Close is SHUTDOWN.
		{"", deadline, wire.Timeout},
		{"", fmt.Errorf("withdrawn: %w", deadline), wire.Timeout},
		{"", context.Canceled, wire.Shutdown},
		{"", errors.New("rediscompat: a stored value is corrupt"), wire.Err},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.name] = true
		t.Run(tc.err.Error(), func(t *testing.T) {
			e := replyOf(tc.err)
			require.True(t, e.Code.Known(), "%q", e)
			assert.Equal(t, tc.want, e.Code, "%q", e)
			assert.Equal(t, e, wire.Parse(e.String()), "the reply reads back")
			if e.Code == wire.Err {
				assert.NotContains(t, e.Text, "context deadline exceeded", "a deadline is TIMEOUT, never ERR")
			}
			var nl *server.NotLeaderError
			if errors.As(tc.err, &nl) {
				id, addr, ok := wire.ParseNotLeader(wire.Parse(e.String()))
				assert.True(t, ok, "%q", e)
				assert.Equal(t, [2]string{nl.Leader, nl.LeaderAddr}, [2]string{id, addr}, "%q", e)
			}
		})
	}
	for _, name := range serverErrors(t) {
		assert.True(t, covered[name], "server.%s has no case here: add it, with the code it must be answered with", name)
	}
}

// serverErrors returns the exported error variables (Err...) and error
// types (...Error) that package server declares.
func serverErrors(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, f := range parseDir(t, "../server") {
		for _, d := range f.file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range g.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if strings.HasPrefix(n.Name, "Err") {
							names = append(names, n.Name)
						}
					}
				case *ast.TypeSpec:
					if s.Name.IsExported() && strings.HasSuffix(s.Name.Name, "Error") {
						names = append(names, s.Name.Name)
					}
				}
			}
		}
	}
	require.NotEmpty(t, names)
	return names
}

type sourceFile struct {
	name string
	file *ast.File
	fset *token.FileSet
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string) []sourceFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []sourceFile
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, 0)
		require.NoError(t, err)
		out = append(out, sourceFile{name: filepath.Base(p), file: f, fset: fset})
	}
	require.NotEmpty(t, out, dir)
	return out
}

// No error reply is written around wire's codes. In redisbridge every one
// is written in errors.go, from a wire.Error whose code is a constant of
// package wire (or relayed from the Redis-compatible layer by writeReply).
// In rediscompat, whose replies keep Redis's words, every error reply's
// first word is a code of package wire, except where a Lua script's own
// error is relayed. A new code fails here until it is added to package
// wire (and docs/protocol.md).
func TestErrorRepliesUseWireCodes(t *testing.T) {
	codes := wireCodeNames(t)
	for _, f := range parseDir(t, ".") {
		inspectFuncs(f, func(fn string, n ast.Node) {
			at := f.fset.Position(n.Pos()).String()
			switch n := n.(type) {
			case *ast.CallExpr:
				switch name := calleeName(n); {
				case (strings.HasSuffix(name, "WriteError") || name == "redcon.AppendError") && f.name != "errors.go" && fn != "WriteError":
					// (A method WriteError implements redcon.Conn for a
					// buffer: it passes on what writeError gave it.)
					t.Errorf("%s: %s outside errors.go: use writeError or writeErr", at, name)
				case (name == "wire.Code" || name == "wire.Parse") && f.name != "errors.go":
					t.Errorf("%s: %s outside errors.go: use a code of package wire", at, name)
				case name == "writeRelayed" && fn != "writeReply":
					t.Errorf("%s: writeRelayed is for the Redis-compatible layer's replies (writeReply) only", at)
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok && isIdent(sel.X, "wire") && sel.Sel.Name == "Error" && len(n.Elts) > 0 {
					code, ok := compositeCode(n).(*ast.SelectorExpr)
					if !ok || !isIdent(code.X, "wire") || !codes[code.Sel.Name] {
						t.Errorf("%s: a wire.Error's Code must be a code constant of package wire", at)
					}
				}
			case *ast.BasicLit:
				if s, ok := stringLit(n); ok && len(s) > 1 && s[0] == '-' && s[1] >= 'A' && s[1] <= 'Z' && f.name != "errors.go" {
					t.Errorf("%s: an error reply written by hand (%q): use errorLine", at, s)
				}
			}
		})
	}
	for _, f := range parseDir(t, "../rediscompat") {
		// A Lua error's message is not a reply: the script's reply is
		// "ERR " and the message.
		luaMessage := map[ast.Node]bool{}
		inspectFuncs(f, func(_ string, n ast.Node) {
			if c, ok := n.(*ast.CallExpr); ok && (calleeName(c) == "L.RaiseError" || calleeName(c) == "L.ArgError") {
				for _, a := range c.Args {
					ast.Inspect(a, func(m ast.Node) bool { luaMessage[m] = true; return true })
				}
			}
		})
		inspectFuncs(f, func(fn string, n ast.Node) {
			at := f.fset.Position(n.Pos()).String()
			switch n := n.(type) {
			case *ast.CallExpr:
				// A conversion to Error, or redis.call's raise of a reply.
				if name := calleeName(n); (name != "Error" && name != "v.raise") || len(n.Args) == 0 {
					return
				}
				if lit, ok := leadingLiteral(n.Args[len(n.Args)-1]); ok {
					if code := wire.Parse(lit).Code; !code.Known() {
						t.Errorf("%s: error reply %q: %q is not a code of package wire", at, lit, code)
					}
				} else if !relays[fn] {
					t.Errorf("%s: an error reply in %s that does not start with a literal code of package wire", at, fn)
				}
			case *ast.BasicLit:
				// An error reply may also be a constant of type Error, or
				// returned as one: a literal that starts with an upper-case
				// word and a space must start with a code.
				s, ok := stringLit(n)
				word, _, spaced := strings.Cut(s, " ")
				if ok && spaced && !luaMessage[n] && len(word) > 1 && strings.Trim(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == "" && !wire.Code(word).Known() {
					t.Errorf("%s: %q starts with %q, which is not a code of package wire", at, s, word)
				}
			}
		})
	}
}

// relays are the functions of rediscompat that pass on an error reply made
// elsewhere: a Lua script's own (scriptError, luaToReply), which keeps the
// code the script gave it, and a command's, raised by redis.call (call).
var relays = map[string]bool{"scriptError": true, "luaToReply": true, "call": true}

// wireCodeNames returns the names of package wire's Code constants.
func wireCodeNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, f := range parseDir(t, "../wire") {
		ast.Inspect(f.file, func(n ast.Node) bool {
			if v, ok := n.(*ast.ValueSpec); ok && v.Type != nil && isIdent(v.Type, "Code") {
				for _, id := range v.Names {
					names[id.Name] = true
				}
			}
			return true
		})
	}
	require.Len(t, names, len(wire.Codes()))
	return names
}

// inspectFuncs calls visit for every node of f, with the name of the
// top-level function it is in ("" outside functions).
func inspectFuncs(f sourceFile, visit func(fn string, n ast.Node)) {
	for _, d := range f.file.Decls {
		fn := ""
		if fd, ok := d.(*ast.FuncDecl); ok {
			fn = fd.Name.Name
		}
		ast.Inspect(d, func(n ast.Node) bool {
			if n != nil {
				visit(fn, n)
			}
			return true
		})
	}
}

// calleeName is a call's function as written: "f", "x.f".
func calleeName(c *ast.CallExpr) string {
	switch f := c.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok {
			return x.Name + "." + f.Sel.Name
		}
		return "." + f.Sel.Name
	}
	return ""
}

func stringLit(n *ast.BasicLit) (string, bool) {
	if n.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(n.Value)
	return s, err == nil
}

// leadingLiteral returns the string literal an expression starts with: the
// literal itself, the left end of a concatenation, or a Sprintf's format.
func leadingLiteral(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		return stringLit(e)
	case *ast.BinaryExpr:
		return leadingLiteral(e.X)
	case *ast.ParenExpr:
		return leadingLiteral(e.X)
	case *ast.CallExpr:
		if calleeName(e) == "fmt.Sprintf" && len(e.Args) > 0 {
			return leadingLiteral(e.Args[0])
		}
	}
	return "", false
}

// compositeCode returns the Code of a wire.Error literal, or nil.
func compositeCode(c *ast.CompositeLit) ast.Expr {
	for i, e := range c.Elts {
		if kv, ok := e.(*ast.KeyValueExpr); ok {
			if isIdent(kv.Key, "Code") {
				return kv.Value
			}
		} else if i == 0 {
			return e
		}
	}
	return nil
}

func isIdent(e ast.Expr, name string) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name == name
}

// In RESP3 every native null is RESP3's null, "_": a RESP3 reader (redis-py
// 8's, ioredis's) does not take RESP2's "$-1" for one.
func TestNativeNullsInRESP3(t *testing.T) {
	b, err := New(faultyLocker{server.ErrNoLeader}, quietConfig(time.Second))
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = b.Serve(ln) }()
	t.Cleanup(func() { _ = b.Close() })
	rc := dialRaw(t, ln.Addr().String())
	require.True(t, strings.HasPrefix(rc.do("HELLO", "3"), "%"))
	assert.Equal(t, "_\r\n", rc.do("FENCE.LEADER"), "no leader known")
}
