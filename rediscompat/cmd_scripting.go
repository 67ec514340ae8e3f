package rediscompat

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/fencerlock/fencer/server"
	lua "github.com/yuin/gopher-lua"
)

// Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, and the cache
// of compiled scripts. A script runs on a vm (lua.go) and calls commands
// through the redis table (lua_redis.go); the whole script is one
// transaction of the node, all or nothing.

func init() {
	register(
		&command{name: "eval", arity: -3, flags: fNoScript | fMovableKy, group: "scripting", summary: "Runs a Lua script."},
		&command{name: "evalsha", arity: -3, flags: fNoScript | fMovableKy, group: "scripting", summary: "Runs a cached Lua script by its SHA1."},
		&command{name: "eval_ro", arity: -3, flags: fNoScript | fMovableKy | fReadOnly, group: "scripting", summary: "Runs a read-only Lua script."},
		&command{name: "evalsha_ro", arity: -3, flags: fNoScript | fMovableKy | fReadOnly, group: "scripting", summary: "Runs a cached read-only Lua script by its SHA1."},
		&command{name: "script", arity: -2, flags: fNoScript, group: "scripting", summary: "A container for script commands (LOAD, EXISTS, FLUSH, KILL)."},
	)
}

// evalArgs splits EVAL's arguments: the script (or SHA1), KEYS, ARGV.
func evalArgs(args [][]byte) (script []byte, keys, argv [][]byte, bad Reply) {
	n, err := strconv.ParseInt(string(args[2]), 10, 64)
	switch {
	case err != nil:
		return nil, nil, nil, errNotInteger
	case n < 0:
		return nil, nil, nil, Error("ERR Number of keys can't be negative")
	case n > int64(len(args)-3):
		return nil, nil, nil, Error("ERR Number of keys can't be greater than number of args")
	}
	return args[1], args[3 : 3+n], args[3+n:], nil
}

// eval runs EVAL, EVALSHA, EVAL_RO and EVALSHA_RO.
func (e *Engine) eval(ctx context.Context, s *Session, name string, args [][]byte) (Reply, error) {
	// As Redis: the declared keys against the user's patterns first, then
	// the script (EVALSHA), then the key count.
	body, keys, argv, bad := evalArgs(args)
	if bad == nil && s.Allowed != nil {
		for _, k := range keys {
			if !s.Allowed(string(k)) {
				return errNoPermKey, nil
			}
		}
	}
	var sc *cachedScript
	if strings.HasPrefix(name, "evalsha") {
		sc = e.scripts.getSHA(args[1])
		if sc == nil {
			return Error("NOSCRIPT No matching script. Please use EVAL."), nil
		}
	}
	if bad != nil {
		return bad, nil
	}
	if sc == nil {
		var r Reply
		sc, r = e.scripts.load(string(body))
		if r != nil {
			return r, nil
		}
	}
	readOnly := strings.HasSuffix(name, "_ro") || sc.noWrites
	keyNames := make([]string, len(keys))
	for i, k := range keys {
		keyNames[i] = string(k)
	}
	var argSet map[string]bool // what --redlock-multi-endpoint asks of ARGV
	var argOrder []string
	if e.cfg.RedlockMultiEndpoint {
		argSet = make(map[string]bool, len(argv))
		for _, a := range argv {
			if !argSet[string(a)] {
				argSet[string(a)] = true
				argOrder = append(argOrder, string(a))
			}
		}
	}
	return e.commit(ctx, s, keyNames, func(d *db) (Reply, error) {
		d.argv, d.argvOrder = argSet, argOrder
		run := &scriptRun{ctx: ctx, e: e, d: d, s: s, readOnly: readOnly}
		r, err := e.runScript(run, sc, keys, argv)
		if err == nil && d.multi {
			d.ghostsDone()
		}
		return r, err
	})
}

// errScriptTime is the error of a script stopped by its time limit.
var errScriptTime = errors.New("the script ran past its time limit")

// runScript runs sc on a pooled vm within the script time limit. A script
// stopped by the limit, or by a fencer limit it met, has no effect: the
// error says why. A Lua error is the script's reply, and what it wrote
// before stays, as in Redis.
func (e *Engine) runScript(run *scriptRun, sc *cachedScript, keys, argv [][]byte) (Reply, error) {
	v, _ := e.vms.Get().(*vm)
	if v == nil {
		v = newVM()
	}
	r, err := v.exec(run, sc.proto, sc.sha, keys, argv, e.cfg.ScriptTimeLimit)
	if v.clean() && v.ctx.Err() == nil {
		e.vms.Put(v)
	} else {
		v.L.Close()
	}
	if errors.Is(err, errScriptTime) {
		return nil, fmt.Errorf("%w: %v (%v); nothing it did took effect", server.ErrLimit, errScriptTime, e.cfg.ScriptTimeLimit)
	}
	return r, err
}

// cachedScript is a compiled script.
type cachedScript struct {
	sha      string
	body     string
	proto    *lua.FunctionProto
	noWrites bool
}

// scriptCache holds compiled scripts by SHA1, at most max, forgetting the
// oldest first.
type scriptCache struct {
	mu    sync.Mutex
	max   int
	bySHA map[string]*cachedScript
	order []string
}

func newScriptCache(max int) *scriptCache {
	return &scriptCache{max: max, bySHA: make(map[string]*cachedScript)}
}

func (sc *scriptCache) get(sha string) *cachedScript {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.bySHA[sha]
}

// getSHA is get of a SHA1 as a client sent it, in either case.
func (sc *scriptCache) getSHA(sha []byte) *cachedScript {
	sc.mu.Lock()
	c := sc.bySHA[string(sha)]
	sc.mu.Unlock()
	if c == nil {
		c = sc.get(strings.ToLower(string(sha)))
	}
	return c
}

// load compiles body (once) and caches it; a script that does not compile
// is answered with Redis's error.
func (sc *scriptCache) load(body string) (*cachedScript, Reply) {
	sha := sha1hex(body)
	if c := sc.get(sha); c != nil {
		return c, nil
	}
	code, noWrites, bad := shebang(body)
	if bad != nil {
		return nil, bad
	}
	proto, err := compile(code)
	if err != nil {
		return nil, Error("ERR Error compiling script (new function): user_script:" + strings.TrimPrefix(err.Error(), "user_script"))
	}
	c := &cachedScript{sha: sha, body: body, proto: proto, noWrites: noWrites}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if _, had := sc.bySHA[sha]; !had {
		if len(sc.order) >= sc.max {
			delete(sc.bySHA, sc.order[0])
			sc.order = sc.order[1:]
		}
		sc.order = append(sc.order, sha)
	}
	sc.bySHA[sha] = c
	return c, nil
}

func (sc *scriptCache) flush() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.bySHA = make(map[string]*cachedScript)
	sc.order = nil
}

// shebang reads a Redis 7 script's "#!lua flags=..." first line: the body
// without it (the line becomes empty, so line numbers hold), and whether it
// says no-writes.
func shebang(body string) (code string, noWrites bool, bad Reply) {
	if !strings.HasPrefix(body, "#!") {
		return body, false, nil
	}
	line, rest, _ := strings.Cut(body, "\n")
	fields := strings.Fields(line[2:])
	if len(fields) == 0 || fields[0] != "lua" {
		return "", false, Error("ERR Could not find engine '" + strings.Join(fields[:min(len(fields), 1)], "") + "'")
	}
	for _, f := range fields[1:] {
		name, val, ok := strings.Cut(f, "=")
		if !ok || name != "flags" {
			return "", false, Error("ERR Unknown lua shebang option: " + name)
		}
		for _, flag := range strings.Split(val, ",") {
			switch flag {
			case "no-writes":
				noWrites = true
			case "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys", "":
			default:
				return "", false, Error("ERR Unexpected flag in script shebang: " + flag)
			}
		}
	}
	return "\n" + rest, noWrites, nil
}

// script serves SCRIPT LOAD | EXISTS | FLUSH.
func (e *Engine) script(args [][]byte) Reply {
	sub := strings.ToLower(string(args[1]))
	switch {
	case sub == "load" && len(args) == 3:
		c, bad := e.scripts.load(string(args[2]))
		if bad != nil {
			return bad
		}
		return Bulk(c.sha)
	case sub == "exists" && len(args) >= 3:
		out := make(Array, 0, len(args)-2)
		for _, a := range args[2:] {
			out = append(out, boolInt(e.scripts.get(strings.ToLower(string(a))) != nil))
		}
		return out
	case sub == "flush" && len(args) <= 3:
		if len(args) == 3 && !strings.EqualFold(string(args[2]), "sync") && !strings.EqualFold(string(args[2]), "async") {
			return Error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
		}
		e.scripts.flush()
		return replyOK
	case sub == "kill" && len(args) == 2:
		return Error("NOTBUSY No scripts in execution right now.")
	case sub == "load" || sub == "exists" || sub == "flush" || sub == "kill":
		return Error("ERR wrong number of arguments for 'script|" + sub + "' command")
	}
	return Error(fmt.Sprintf("ERR unknown subcommand '%s'. Try SCRIPT HELP.", args[1]))
}

// Script returns the body of the cached script sha, for a node that
// forwards EVALSHA to a leader that may not have it.
func (e *Engine) Script(sha string) (string, bool) {
	c := e.scripts.get(strings.ToLower(sha))
	if c == nil {
		return "", false
	}
	return c.body, true
}
