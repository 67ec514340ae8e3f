package rediscompat

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The redis table scripts call: redis.call and redis.pcall run a command of
// the layer inside the script's transaction (callFromScript, through the
// same command table a client's command goes through), and replies turn
// into Lua values and back as Redis converts them.

// callFromScript runs redis.call's command inside run's transaction.
func (e *Engine) callFromScript(run *scriptRun, args [][]byte) Reply {
	cmd := lookup(args[0])
	switch {
	case cmd == nil && notFromScript[strings.ToLower(string(args[0]))]:
		return Error("ERR This Redis command is not allowed from script")
	case cmd == nil:
		return Error("ERR Unknown Redis command called from script")
	case cmd.flags&fNoScript != 0:
		return Error("ERR This Redis command is not allowed from script")
	case !cmd.arityOK(len(args)):
		return Error("ERR Wrong number of args calling Redis command from script")
	case run.readOnly && cmd.flags&fWrite != 0:
		return Error("ERR Write commands are not allowed from read-only scripts.")
	}
	if run.d.allowed != nil {
		for _, k := range cmd.keysOf(args) {
			if !run.d.allowed(k) {
				return Error("NOPERM The user executing the script can't access at least one of the keys mentioned in the command")
			}
		}
	}
	if run.d.multi && run.d.argv != nil {
		run.d.ghostUse(cmd.name, cmd.keysOf(args))
		if run.d.err != nil {
			run.stop = run.d.err
			return errStore
		}
	}
	// One call at a time: the script's own is reused.
	run.call = call{d: run.d, args: args, e: e, script: true, resp3: run.resp3}
	r := cmd.run(&run.call)
	run.call = call{}
	if run.d.err != nil {
		run.stop = run.d.err
	}
	return r
}

// notFromScript are Redis commands a script may not call (the ones fencer
// has that are flagged fNoScript answer the same).
var notFromScript = map[string]bool{
	"multi": true, "exec": true, "discard": true, "watch": true, "unwatch": true,
	"subscribe": true, "psubscribe": true, "ssubscribe": true, "unsubscribe": true, "punsubscribe": true, "sunsubscribe": true,
	"blpop": true, "brpop": true, "bzpopmin": true, "bzpopmax": true, "blmove": true, "brpoplpush": true,
	"client": true, "hello": true, "auth": true, "quit": true, "reset": true, "wait": true, "waitaof": true,
}

func bytesTable(L *lua.LState, items [][]byte) *lua.LTable {
	t := L.CreateTable(len(items), 0)
	for i, it := range items {
		t.RawSetInt(i+1, lua.LString(it))
	}
	return t
}

// newRedis builds the redis table.
func (v *vm) newRedis() *lua.LTable {
	L := v.L
	t := L.CreateTable(0, 32)
	fns := map[string]lua.LGFunction{
		"call":  func(L *lua.LState) int { return v.call(L, true) },
		"pcall": func(L *lua.LState) int { return v.call(L, false) },
		"error_reply": func(L *lua.LState) int {
			// As Redis: a message without a code gets ERR.
			msg := L.CheckString(1)
			if !strings.Contains(msg, " ") {
				msg = "ERR " + msg
			}
			r := L.CreateTable(0, 1)
			r.RawSetString("err", lua.LString(msg))
			L.Push(r)
			return 1
		},
		"status_reply": func(L *lua.LState) int {
			r := L.CreateTable(0, 1)
			r.RawSetString("ok", lua.LString(L.CheckString(1)))
			L.Push(r)
			return 1
		},
		"sha1hex": func(L *lua.LState) int {
			L.Push(lua.LString(sha1hex(L.CheckString(1))))
			return 1
		},
		"log": func(L *lua.LState) int {
			if L.GetTop() < 2 {
				L.RaiseError("redis.log() requires two arguments or more.")
			}
			if v.run != nil && v.run.e.log != nil {
				parts := make([]string, 0, L.GetTop()-1)
				for i := 2; i <= L.GetTop(); i++ {
					parts = append(parts, lua.LVAsString(L.Get(i)))
				}
				v.run.e.log.Debug("redis.log from a script", "level", L.CheckInt(1), "message", strings.Join(parts, " "))
			}
			return 0
		},
		// Effects replication is all fencer does: these are accepted.
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"set_repl": func(L *lua.LState) int {
			L.CheckInt(1)
			return 0
		},
		"setresp": func(L *lua.LState) int {
			switch L.CheckInt(1) {
			case 2:
				v.run.resp3 = false
			case 3:
				v.run.resp3 = true
			default:
				L.RaiseError("RESP version must be 2 or 3.")
			}
			return 0
		},
		"breakpoint": func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":      func(L *lua.LState) int { return 0 },
		"acl_check_cmd": func(L *lua.LState) int {
			args := v.callArgs(L)
			cmd := lookup(args[0])
			if cmd == nil {
				L.RaiseError("Invalid command passed to redis.acl_check_cmd()")
			}
			allowed := true
			for _, k := range cmd.keysOf(args) {
				allowed = allowed && v.run.d.allowed == nil || v.run.d.allowed(k)
			}
			L.Push(lua.LBool(allowed))
			return 1
		},
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	for name, val := range map[string]int{"LOG_DEBUG": 0, "LOG_VERBOSE": 1, "LOG_NOTICE": 2, "LOG_WARNING": 3,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3} {
		t.RawSetString(name, lua.LNumber(val))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(RedisVersion))
	t.RawSetString("REDIS_VERSION_NUM", lua.LNumber(redisVersionNum))
	return t
}

// callArgs converts the Lua arguments of redis.call to a command.
func (v *vm) callArgs(L *lua.LState) [][]byte {
	n := L.GetTop()
	if n == 0 {
		L.RaiseError("Please specify at least one argument for this redis lib call")
	}
	args := make([][]byte, n)
	for i := 1; i <= n; i++ {
		switch a := L.Get(i).(type) {
		case lua.LString:
			args[i-1] = []byte(a)
		case lua.LNumber:
			args[i-1] = strconv.AppendFloat(nil, float64(a), 'g', 17, 64)
		default:
			v.raise(L, "ERR Lua redis lib command arguments must be strings or integers")
		}
	}
	return args
}

// raise raises msg from redis.call: the script's error reply is msg itself.
func (v *vm) raise(L *lua.LState, msg string) {
	v.run.callErr = msg
	L.Error(lua.LString(msg), 0)
}

// call is redis.call (raise) and redis.pcall.
func (v *vm) call(L *lua.LState, raise bool) int {
	run := v.run
	args := v.callArgs(L)
	if err := run.ctx.Err(); err != nil {
		run.stop = err
		L.Error(lua.LString(err.Error()), 0)
	}
	reply := run.e.callFromScript(run, args)
	if run.stop != nil {
		// A limit: end the script; exec answers it whatever the script
		// does with this error.
		L.Error(lua.LString(run.stop.Error()), 0)
	}
	if e, isErr := reply.(Error); isErr {
		if raise {
			v.raise(L, string(e))
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("err", lua.LString(e))
		L.Push(t)
		return 1
	}
	L.Push(replyToLua(L, reply, run.resp3))
	return 1
}

// replyToLua converts a command's reply as Redis converts RESP to Lua.
func replyToLua(L *lua.LState, r Reply, resp3 bool) lua.LValue {
	switch r := r.(type) {
	case Int:
		return lua.LNumber(r)
	case Bulk:
		return lua.LString(r)
	case Status:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(r))
		return t
	case Error:
		t := L.CreateTable(0, 1)
		t.RawSetString("err", lua.LString(r))
		return t
	case Nil, NilArray:
		if resp3 {
			return lua.LNil
		}
		return lua.LFalse
	case Array:
		t := L.CreateTable(len(r), 0)
		for i, x := range r {
			t.RawSetInt(i+1, replyToLua(L, x, resp3))
		}
		return t
	case Map:
		if !resp3 {
			return replyToLua(L, Array(r), false)
		}
		m := L.NewTable()
		for i := 0; i+1 < len(r); i += 2 {
			m.RawSet(replyToLua(L, r[i], true), replyToLua(L, r[i+1], true))
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("map", m)
		return t
	case Double:
		if !resp3 {
			return lua.LString(formatFloat(float64(r)))
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("double", lua.LNumber(r))
		return t
	case Bool:
		if !resp3 {
			if r {
				return lua.LNumber(1)
			}
			return lua.LNumber(0)
		}
		return lua.LBool(r)
	}
	return lua.LFalse
}

// luaToReply converts a script's return value as Redis converts Lua to
// RESP: a number is truncated to an integer, true is 1, false and nil are
// null, a table with err or ok is an error or a status, any other table an
// array up to its first nil.
func luaToReply(lv lua.LValue, resp3 bool) Reply {
	switch v := lv.(type) {
	case lua.LNumber:
		f := float64(v)
		if math.IsNaN(f) {
			return Int(math.MinInt64)
		}
		return Int(int64(f))
	case lua.LString:
		return Bulk(v)
	case lua.LBool:
		if v {
			if resp3 {
				return Bool(true)
			}
			return Int(1)
		}
		if resp3 {
			return Bool(false)
		}
		return Nil{}
	case *lua.LTable:
		if e, ok := v.RawGetString("err").(lua.LString); ok {
			return Error(withCode(string(e)))
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return Status(s)
		}
		if resp3 {
			if d, ok := v.RawGetString("double").(lua.LNumber); ok {
				return Double(d)
			}
		}
		out := Array{}
		for i := 1; ; i++ {
			x := v.RawGetInt(i)
			if x == lua.LNil {
				break
			}
			out = append(out, luaToReply(x, resp3))
		}
		return out
	}
	return Nil{}
}
