package rediscompat

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"math"
	"strconv"
	"strings"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// The Lua sandbox, as Redis 7 sets it up: the base, table, string and math
// libraries, cjson and bit, and the redis table; no os, io, debug, package,
// coroutine, load*, dofile, require or print. Globals are read-only: a
// script reads undefined globals as an error, and cannot create any.
//
// A vm is one interpreter; the engine keeps a pool of them and runs one
// script at a time on each. Every table a script can reach that outlives it
// refuses writes, as Redis 7's read-only tables do: its environment (empty,
// reading through to KEYS, ARGV and the shared globals), the library tables
// (proxies of the real ones), the string metatable (seen through a proxy),
// and rawset on any of them. So nothing a script does outlives it; a vm a
// script changed anyway (clean) is dropped rather than reused.

// luaMaxString bounds string.rep's result.
const luaMaxString = 64 << 20

type vm struct {
	L       *lua.LState
	globals *lua.LTable // the shared globals, read through env's metatable
	// env is the scripts' environment, always empty; layer holds what a
	// run sees besides the globals: KEYS and ARGV, set for each run, and _G.
	env, layer *lua.LTable
	// readonly are the tables rawset refuses; stringMeta is the string
	// metatable, which scripts see as stringMetaProxy.
	readonly                    map[*lua.LTable]bool
	stringMeta, stringMetaProxy *lua.LTable
	proxies                     []*lua.LTable
	run                         *scriptRun
	// rngReset reseeds math.random before every script.
	rngReset func()
	// ctx is the interpreter's context for good; timer cancels it when a
	// script runs past its time limit, and a vm whose timer fired is not
	// reused. (A context of each run's own would cost a timer and a
	// context per script.)
	ctx   context.Context
	timer *time.Timer
}

// scriptRun is what the redis table's functions need while a script runs.
type scriptRun struct {
	// ctx is the request's: redis.call refuses to go on once it ended.
	ctx      context.Context
	e        *Engine
	d        *db
	s        *Session
	readOnly bool
	resp3    bool // after redis.setresp(3)
	// callErr is the last error redis.call raised: the script's error
	// reply is then that error, as Redis makes it.
	callErr string
	// stop is a fencer limit or store error met inside the script: it ends
	// with nothing committed, whatever the script does with the error.
	stop error
	// call is the command redis.call runs.
	call call
}

func newVM() *vm {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       200,
		RegistrySize:        1024,
		RegistryMaxSize:     1 << 20,
		RegistryGrowStep:    64,
		IncludeGoStackTrace: false,
	})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	v := &vm{L: L, globals: L.G.Global}
	g := v.globals
	for _, name := range []string{"dofile", "loadfile", "load", "loadstring", "require", "module", "print",
		"_printregs", "newproxy", "getfenv", "setfenv", "package", "coroutine", "channel", "os", "io", "debug"} {
		g.RawSetString(name, lua.LNil)
	}
	// Lua 5.1's number conversions (gopher-lua's differ: tonumber("1e3")
	// is nil there, tostring(1/3) has 16 digits).
	g.RawSetString("tostring", L.NewFunction(luaToString(g.RawGetString("tostring").(*lua.LFunction))))
	g.RawSetString("tonumber", L.NewFunction(luaToNumber))
	strlib := g.RawGetString("string").(*lua.LTable)
	strlib.RawSetString("rep", L.NewFunction(luaStringRep))
	strlib.RawSetString("dump", lua.LNil)
	mathlib := g.RawGetString("math").(*lua.LTable)
	mathlib.RawSetString("huge", lua.LNumber(math.Inf(1)))
	rng := &rand48{}
	mathlib.RawSetString("random", L.NewFunction(rng.random))
	mathlib.RawSetString("randomseed", L.NewFunction(rng.seed))
	v.rngReset = rng.reset

	g.RawSetString(forNumberName, L.NewFunction(forNumber))
	g.RawSetString("cjson", newCjson(L))
	g.RawSetString("bit", newBit(L))
	g.RawSetString("redis", v.newRedis())

	// Library tables become read-only proxies, the string metatable's
	// __index (what ("x"):upper() finds) the string proxy.
	v.readonly = map[*lua.LTable]bool{g: true}
	proxy := func(real *lua.LTable) *lua.LTable {
		p := L.NewTable()
		meta := L.CreateTable(0, 3)
		meta.RawSetString("__index", real)
		meta.RawSetString("__newindex", L.NewFunction(luaReadonly))
		meta.RawSetString("__metatable", lua.LFalse)
		L.SetMetatable(p, meta)
		v.proxies = append(v.proxies, p)
		v.readonly[p] = true
		return p
	}
	for _, name := range []string{"string", "table", "math", "cjson", "bit", "redis"} {
		g.RawSetString(name, proxy(g.RawGetString(name).(*lua.LTable)))
	}
	if mt, ok := L.GetMetatable(lua.LString("")).(*lua.LTable); ok {
		mt.RawSetString("__index", g.RawGetString("string"))
		v.stringMeta = mt
		v.stringMetaProxy = proxy(mt)
	}
	g.RawSetString("getmetatable", L.NewFunction(v.getmetatable))
	rawset := g.RawGetString("rawset").(*lua.LFunction)
	g.RawSetString("rawset", L.NewFunction(func(L *lua.LState) int {
		if v.readonly[L.CheckTable(1)] {
			L.RaiseError("Attempt to modify a readonly table")
		}
		L.Push(rawset)
		L.Push(L.Get(1))
		L.Push(L.Get(2))
		L.Push(L.Get(3))
		L.Call(3, 0)
		L.Push(L.Get(1)) // Lua 5.1's rawset returns the table
		return 1
	}))
	setmetatable := g.RawGetString("setmetatable").(*lua.LFunction)
	g.RawSetString("setmetatable", L.NewFunction(func(L *lua.LState) int {
		if t, ok := L.Get(1).(*lua.LTable); ok && v.readonly[t] {
			L.RaiseError("Attempt to modify a readonly table")
		}
		L.Push(setmetatable)
		L.Push(L.Get(1))
		L.Push(L.Get(2))
		L.Call(2, 1)
		return 1
	}))

	// A global a script reads is looked up in its environment (empty, so
	// that every assignment to a global meets __newindex and is refused),
	// then in the run's layer (KEYS, ARGV, _G), then in the globals, and
	// then (their metatable's __index) it is an error. Tables all the way
	// but for the error: a global read costs no Go call.
	globalsMeta := L.CreateTable(0, 3)
	globalsMeta.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", lua.LVAsString(L.Get(2)))
		return 0
	}))
	globalsMeta.RawSetString("__newindex", L.NewFunction(luaReadonly))
	globalsMeta.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(g, globalsMeta)
	v.layer = L.CreateTable(0, 3)
	layerMeta := L.CreateTable(0, 3)
	layerMeta.RawSetString("__index", g)
	layerMeta.RawSetString("__newindex", L.NewFunction(luaReadonly))
	layerMeta.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(v.layer, layerMeta)
	v.env = L.CreateTable(0, 0)
	envMeta := L.CreateTable(0, 3)
	envMeta.RawSetString("__index", v.layer)
	envMeta.RawSetString("__newindex", L.NewFunction(luaReadonly))
	envMeta.RawSetString("__metatable", lua.LFalse)
	L.SetMetatable(v.env, envMeta)
	v.layer.RawSetString("_G", v.env)
	v.readonly[v.env], v.readonly[v.layer] = true, true
	ctx, cancel := context.WithCancel(context.Background())
	v.ctx, v.timer = ctx, time.AfterFunc(time.Hour, cancel)
	v.timer.Stop()
	L.SetContext(ctx)
	return v
}

func luaReadonly(L *lua.LState) int {
	L.RaiseError("Attempt to modify a readonly table")
	return 0
}

// luaStringRep is string.rep with its result bounded.
func luaStringRep(L *lua.LState) int {
	s := L.CheckString(1)
	n := L.CheckInt(2)
	if n <= 0 || s == "" {
		L.Push(lua.LString(""))
		return 1
	}
	if len(s)*n > luaMaxString || len(s)*n < 0 {
		L.RaiseError("resulting string too large")
	}
	L.Push(lua.LString(strings.Repeat(s, n)))
	return 1
}

// luaNumberString formats a number as Lua 5.1 does (%.14g).
func luaNumberString(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}

// luaToString is tostring with Lua 5.1's number format; other values go to
// gopher-lua's own.
func luaToString(orig *lua.LFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if n, ok := L.CheckAny(1).(lua.LNumber); ok {
			L.Push(lua.LString(luaNumberString(float64(n))))
			return 1
		}
		L.Push(orig)
		L.Push(L.Get(1))
		L.Call(1, 1)
		return 1
	}
}

// luaToNumber is Lua 5.1's tonumber: a decimal or hexadecimal number with
// optional spaces around it, or an integer in a base from 2 to 36.
func luaToNumber(L *lua.LState) int {
	v := L.CheckAny(1)
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		base := L.CheckInt(2)
		if base < 2 || base > 36 {
			L.ArgError(2, "base out of range")
		}
		s := strings.ToLower(strings.TrimSpace(lua.LVAsString(v)))
		n, err := strconv.ParseInt(s, base, 64)
		if err != nil {
			u, err2 := strconv.ParseUint(s, base, 64)
			if err2 != nil {
				L.Push(lua.LNil)
				return 1
			}
			L.Push(lua.LNumber(float64(u)))
			return 1
		}
		L.Push(lua.LNumber(n))
		return 1
	}
	switch x := v.(type) {
	case lua.LNumber:
		L.Push(x)
	case lua.LString:
		if f, ok := parseLuaNumber(string(x)); ok {
			L.Push(lua.LNumber(f))
		} else {
			L.Push(lua.LNil)
		}
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// parseLuaNumber reads a number as Lua 5.1's lua_str2number (strtod, and
// hexadecimal) with surrounding spaces allowed.
func parseLuaNumber(s string) (float64, bool) {
	s = strings.Trim(s, " \t\n\r\v\f")
	if s == "" {
		return 0, false
	}
	neg := false
	body := s
	if body[0] == '-' || body[0] == '+' {
		neg, body = body[0] == '-', body[1:]
	}
	if len(body) > 2 && (body[:2] == "0x" || body[:2] == "0X") {
		n, err := strconv.ParseUint(body[2:], 16, 64)
		if err != nil {
			return 0, false
		}
		f := float64(n)
		if neg {
			f = -f
		}
		return f, true
	}
	lower := strings.ToLower(body)
	if strings.HasPrefix(lower, "inf") || strings.HasPrefix(lower, "nan") || strings.ContainsAny(body, "_") {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return f, true
}

// clean reports whether no script changed the shared state, so the vm may
// be reused: every write to it is refused, this checks that it was (a
// proxy, the environment or the string metatable with a field of its own,
// the layer with more than KEYS, ARGV and _G).
func (v *vm) clean() bool {
	for _, p := range v.proxies {
		if k, _ := p.Next(lua.LNil); k != lua.LNil {
			return false
		}
	}
	if k, _ := v.env.Next(lua.LNil); k != lua.LNil {
		return false
	}
	if v.layer.RawGetString("_G") != v.env {
		return false
	}
	if v.stringMeta != nil && v.stringMeta.RawGetString("__index") != v.globals.RawGetString("string") {
		return false
	}
	return true
}

// getmetatable is Lua's, but a string's metatable is seen through its
// read-only proxy.
func (v *vm) getmetatable(L *lua.LState) int {
	mt := L.GetMetatable(L.CheckAny(1))
	if t, ok := mt.(*lua.LTable); ok {
		if t == v.stringMeta {
			L.Push(v.stringMetaProxy)
			return 1
		}
		if f := t.RawGetString("__metatable"); f != lua.LNil {
			L.Push(f)
			return 1
		}
	}
	L.Push(mt)
	return 1
}

// compile parses and compiles a script's body.
func compile(body string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(body), "user_script")
	if err != nil {
		return nil, err
	}
	coerceForLoops(chunk)
	proto, err := lua.Compile(chunk, "user_script")
	if err != nil {
		return nil, err
	}
	// The main chunk is a vararg function that has no local named arg (as
	// in Lua 5.1): the table gopher-lua would build for one is not made.
	proto.IsVarArg &^= lua.VarArgNeedsArg
	return proto, nil
}

func sha1hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// exec runs proto with KEYS and ARGV in the environment and returns the
// script's reply. The error is a fencer limit (errScriptTime after
// limit) or the context's: the script then has no effect. The vm may be
// reused afterwards only if it reports clean.
func (v *vm) exec(run *scriptRun, proto *lua.FunctionProto, sha string, keys, argv [][]byte, limit time.Duration) (Reply, error) {
	L := v.L
	v.run = run
	defer func() { v.run = nil }()
	v.rngReset()
	v.layer.RawSetString("KEYS", bytesTable(L, keys))
	v.layer.RawSetString("ARGV", bytesTable(L, argv))
	fn := L.NewFunctionFromProto(proto)
	fn.Env = v.env
	L.SetTop(0)
	L.Push(fn)
	v.timer.Reset(limit)
	err := L.PCall(0, 1, nil)
	v.timer.Stop()
	ret := L.Get(-1)
	L.SetTop(0)
	switch {
	case run.stop != nil:
		return nil, run.stop
	case v.ctx.Err() != nil:
		return nil, errScriptTime
	case run.ctx.Err() != nil:
		return nil, run.ctx.Err()
	case err != nil:
		return scriptError(err, run, sha), nil
	}
	return luaToReply(ret, run.resp3), nil
}

// scriptError is the reply of a script that raised an error: a table's err
// field, redis.call's own error, or ERR and Lua's message.
func scriptError(err error, run *scriptRun, sha string) Reply {
	suffix := " script: " + sha + ", on @user_script."
	apiErr, ok := err.(*lua.ApiError)
	if !ok {
		return Error("ERR " + err.Error() + suffix)
	}
	switch obj := apiErr.Object.(type) {
	case *lua.LTable:
		if e, ok := obj.RawGetString("err").(lua.LString); ok {
			return Error(withCode(string(e)) + suffix)
		}
		return Error("ERR unknown error" + suffix)
	case lua.LString:
		if run.callErr != "" && string(obj) == run.callErr {
			return Error(run.callErr + suffix)
		}
		if apiErr.Type == lua.ApiErrorSyntax {
			return Error("ERR Error compiling script (new function): " + string(obj))
		}
		return Error("ERR " + string(obj) + suffix)
	}
	return Error("ERR " + lua.LVAsString(apiErr.Object) + suffix)
}

// withCode gives an error text the generic code if it has none (Redis
// makes "-ERR" of a bare message).
func withCode(s string) string {
	if s == "" {
		return "ERR"
	}
	return s
}

// rand48 is math.random as Redis has it (its redisLrand48), reseeded with 0
// before every script, so that a script's numbers do not depend on what ran
// before it (Redis 7 no longer reseeds, so its numbers differ).
type rand48 struct{ x uint64 }

const (
	rand48A    = 0x5DEECE66D
	rand48C    = 0xB
	rand48Mask = 1<<48 - 1
	rand48Max  = math.MaxInt32
)

func (r *rand48) reset()          { r.x = 0x330E }
func (r *rand48) setSeed(s int32) { r.x = uint64(uint32(s))<<16 | 0x330E }
func (r *rand48) next() int32 {
	r.x = (rand48A*r.x + rand48C) & rand48Mask
	return int32(r.x >> 17)
}

func (r *rand48) random(L *lua.LState) int {
	f := float64(r.next()%rand48Max) / float64(rand48Max)
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(f))
	case 1:
		u := L.CheckInt(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(f*float64(u)) + 1))
	case 2:
		l, u := L.CheckInt(1), L.CheckInt(2)
		if l > u {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(math.Floor(f*float64(u-l+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

func (r *rand48) seed(L *lua.LState) int {
	r.setSeed(int32(L.CheckInt(1)))
	return 0
}
