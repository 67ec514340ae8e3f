package rediscompat

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/server"
	lua "github.com/yuin/gopher-lua"
)

// RedisVersion is the Redis version fencer reports (INFO, HELLO,
// redis.REDIS_VERSION): the one whose behaviour it follows.
const RedisVersion = "7.2.0"

const redisVersionNum = 0x070200

// Config configures an Engine.
type Config struct {
	// RedlockMultiEndpoint makes a Redlock client given every node of one
	// cluster as if they were independent masters reach its quorum: a
	// same-value SET NX on a key that value holds returns the same grant,
	// a compare-then-delete by a value is that value's remembered release,
	// and a write of the value whose release is the key's newest is
	// refused (see docs/redlock.md). Safe only with a unique value per lock
	// attempt.
	RedlockMultiEndpoint bool
	// DefaultLockTTL is the TTL of a key SETNX or SET NX without an expire
	// time creates: fencer never grants an endless lock.
	DefaultLockTTL time.Duration
	// ScriptTimeLimit bounds a script's run time; a script stopped by it
	// has no effect.
	ScriptTimeLimit time.Duration
	// MaxScripts bounds the script cache (SCRIPT LOAD, and every EVAL's
	// script); the oldest is forgotten first.
	MaxScripts int
	// Publish sends a message to a channel's subscribers on every node and
	// returns how many received it here. It is called once a command's
	// entry committed.
	Publish func(shard bool, channel string, message []byte) int
	// Logger receives redis.log and the engine's own logs.
	Logger *slog.Logger
}

// DefaultConfig returns the engine's defaults.
func DefaultConfig() Config {
	return Config{DefaultLockTTL: 30 * time.Second, ScriptTimeLimit: 5 * time.Second, MaxScripts: 10000}
}

// Engine runs Redis commands and scripts on a node.
type Engine struct {
	node    Node
	cfg     Config
	log     *slog.Logger
	scripts *scriptCache
	vms     sync.Pool
}

// New returns an engine over node.
func New(node Node, cfg Config) *Engine {
	d := DefaultConfig()
	if cfg.DefaultLockTTL <= 0 {
		cfg.DefaultLockTTL = d.DefaultLockTTL
	}
	if cfg.ScriptTimeLimit <= 0 {
		cfg.ScriptTimeLimit = d.ScriptTimeLimit
	}
	if cfg.MaxScripts <= 0 {
		cfg.MaxScripts = d.MaxScripts
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Engine{node: node, cfg: cfg, log: cfg.Logger, scripts: newScriptCache(cfg.MaxScripts)}
}

// Session is what a connection's commands carry.
type Session struct {
	// RESP3 is set once the client sent HELLO 3: replies use RESP3's types.
	RESP3 bool
	// Allowed checks a key against the user's key patterns (every key a
	// command or a script's redis.call names); nil allows every key.
	Allowed func(key string) bool
}

// KeysOf returns the keys a command's arguments name, for access control
// and for clients that ask COMMAND; for EVAL and its kin, KEYS.
func KeysOf(args [][]byte) []string {
	cmd := lookup(args[0])
	if cmd == nil || !cmd.arityOK(len(args)) {
		return nil
	}
	if cmd.flags&fMovableKy != 0 {
		_, keys, _, _ := evalArgs(args)
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = string(k)
		}
		return out
	}
	return cmd.keysOf(args)
}

// errNoPermKey is the reply to a command naming a key the user may not use.
const errNoPermKey = Error("NOPERM No permissions to access a key")

// Do runs one command: args[0] is its name. It returns the command's reply,
// or the node's error (server.NotLeaderError, server.ErrNoLeader, the
// context's: nothing was done; server.ErrUnknownOutcome: it may have been;
// server.ErrLimit and friends: a limit stopped it, nothing was done).
func (e *Engine) Do(ctx context.Context, s *Session, args [][]byte) (Reply, error) {
	cmd := lookup(args[0])
	if cmd == nil {
		return Error(fmt.Sprintf("ERR unknown command '%s'", args[0])), nil
	}
	if !cmd.arityOK(len(args)) {
		return wrongArity(cmd.name), nil
	}
	switch cmd.name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		return e.eval(ctx, s, cmd.name, args)
	case "script":
		return e.script(args), nil
	case "blpop", "brpop":
		return e.blockingPop(ctx, s, cmd, args)
	}
	keys := cmd.keysOf(args)
	if s.Allowed != nil {
		for _, k := range keys {
			if !s.Allowed(k) {
				return errNoPermKey, nil
			}
		}
	}
	if cmd.flags&fNoTxn != 0 {
		c := &call{d: newDB(nil, time.Now()), args: args, e: e, resp3: s.RESP3}
		r := cmd.run(c)
		e.deliver(c.d.pubs)
		return r, nil
	}
	return e.commit(ctx, s, keys, func(d *db) (Reply, error) {
		return cmd.run(&call{d: d, args: args, e: e, resp3: s.RESP3}), nil
	})
}

// commit runs fn on a db over one transaction of keys (server.Node.Update)
// and returns its reply once the transaction committed, after publishing
// what fn published. An error of fn's discards what it did.
func (e *Engine) commit(ctx context.Context, s *Session, keys []string, fn func(d *db) (Reply, error)) (Reply, error) {
	var reply Reply
	var pubs []publication
	err := e.node.Update(ctx, keys, func(tx *server.Tx) error {
		d := e.newDB(tx, s)
		r, err := fn(d)
		if err != nil {
			return err
		}
		if err := d.flush(); err != nil {
			return err
		}
		reply, pubs = r, d.pubs
		return nil
	})
	if err != nil {
		return nil, err
	}
	e.deliver(pubs)
	return reply, nil
}

func (e *Engine) newDB(tx *server.Tx, s *Session) *db {
	d := newDB(tx, time.Now())
	d.multi = e.cfg.RedlockMultiEndpoint
	d.allowed = s.Allowed
	return d
}

// deliver publishes what a committed command or script published.
func (e *Engine) deliver(pubs []publication) {
	for _, p := range pubs {
		if e.cfg.Publish != nil {
			e.cfg.Publish(p.shard, p.channel, []byte(p.message))
		}
	}
}

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

func init() {
	register(
		&command{name: "eval", arity: -3, flags: fNoScript | fMovableKy, group: "scripting", summary: "Runs a Lua script."},
		&command{name: "evalsha", arity: -3, flags: fNoScript | fMovableKy, group: "scripting", summary: "Runs a cached Lua script by its SHA1."},
		&command{name: "eval_ro", arity: -3, flags: fNoScript | fMovableKy | fReadOnly, group: "scripting", summary: "Runs a read-only Lua script."},
		&command{name: "evalsha_ro", arity: -3, flags: fNoScript | fMovableKy | fReadOnly, group: "scripting", summary: "Runs a cached read-only Lua script by its SHA1."},
		&command{name: "script", arity: -2, flags: fNoScript, group: "scripting", summary: "A container for script commands (LOAD, EXISTS, FLUSH, KILL)."},
		&command{name: "time", arity: 1, flags: fNoTxn | fFast, group: "server", summary: "Returns the leader's time (or this node's, outside a script).", run: cmdTime},
		&command{name: "publish", arity: 3, flags: fNoTxn | fFast, group: "pubsub", summary: "Posts a message to a channel, on every node.", run: func(c *call) Reply { return publish(c, false) }},
		&command{name: "spublish", arity: 3, flags: fNoTxn | fFast, first: 1, last: 1, step: 1, group: "pubsub", summary: "Posts a message to a shard channel, on every node.", run: func(c *call) Reply { return publish(c, true) }},
		&command{name: "ping", arity: -1, flags: fNoTxn | fFast, group: "connection", summary: "Returns PONG.", run: cmdPing},
		&command{name: "echo", arity: 2, flags: fNoTxn | fFast, group: "connection", summary: "Returns the given string.", run: func(c *call) Reply { return Bulk(c.arg(1)) }},
		&command{name: "select", arity: 2, flags: fNoTxn | fFast, group: "connection", summary: "Selects the database: fencer has only 0.", run: cmdSelect},
	)
}

func cmdTime(c *call) Reply {
	now := c.d.now
	return Array{Bulk(strconv.FormatInt(now.Unix(), 10)), Bulk(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))}
}

func cmdSelect(c *call) Reply {
	n, ok := parseInt(c.args[1])
	switch {
	case !ok:
		return errNotInteger
	case n != 0:
		return Error("ERR DB index is out of range")
	}
	return replyOK
}

func cmdPing(c *call) Reply {
	switch len(c.args) {
	case 1:
		return Status("PONG")
	case 2:
		return Bulk(c.arg(1))
	}
	return wrongArity("ping")
}

// publish queues a message; it is sent once the command's entry commits (at
// once, for PUBLISH sent by a client). A script learns no receiver count: 0.
func publish(c *call, shard bool) Reply {
	c.d.pubs = append(c.d.pubs, publication{shard: shard, channel: c.arg(1), message: c.arg(2)})
	if c.script || c.e.cfg.Publish == nil {
		return zero
	}
	p := c.d.pubs[len(c.d.pubs)-1]
	c.d.pubs = c.d.pubs[:len(c.d.pubs)-1]
	return Int(c.e.cfg.Publish(p.shard, p.channel, []byte(p.message)))
}

// Token returns key's fencing token, if it has one: a string's (only if
// its value is member, when member is given), or a hash's (only if it has
// the field member, when given). The read is linearizable.
func (e *Engine) Token(ctx context.Context, key string, member []byte) (uint64, bool, error) {
	var tok uint64
	var has bool
	err := e.node.Update(ctx, []string{key}, func(tx *server.Tx) error {
		tok, has = 0, false
		rec, ok, err := tx.Get(key)
		if err != nil || !ok {
			return err
		}
		switch rec.Kind {
		case fsm.KindString:
			has = member == nil || rec.Value == string(member)
		case fsm.KindHash:
			has = member == nil
			if !has {
				h, err := decodeHash(rec.Value)
				if err != nil {
					return err
				}
				_, has = h.get(string(member))
			}
		}
		tok = rec.Token
		return nil
	})
	return tok, has && tok != 0, err
}

// Names returns the names of every command the layer has, sorted.
func Names() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// blockPoll is how often a waiting BLPOP or BRPOP looks at its lists again.
const blockPoll = 25 * time.Millisecond

// blockingPop serves BLPOP and BRPOP: the first element of the first
// non-empty list, taken in one transaction, or, once the timeout (or ctx)
// ends, the null array. It waits by looking again every blockPoll, each
// look a transaction of its own; ctx bounds it (the bridge gives it the
// timeout on top of the request's).
func (e *Engine) blockingPop(ctx context.Context, s *Session, cmd *command, args [][]byte) (Reply, error) {
	secs, ok := parseFloat(args[len(args)-1])
	if !ok {
		return Error("ERR timeout is not a float or out of range"), nil
	}
	if secs < 0 {
		return Error("ERR timeout is negative"), nil
	}
	keys := cmd.keysOf(args)
	for _, k := range keys {
		if s.Allowed != nil && !s.Allowed(k) {
			return errNoPermKey, nil
		}
	}
	var end <-chan time.Time
	if secs > 0 {
		t := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		end = t.C
	}
	left := cmd.name == "blpop"
	for {
		var reply Reply
		err := e.node.Update(ctx, keys, func(tx *server.Tx) error {
			reply = nil
			d := e.newDB(tx, s)
			for _, k := range keys {
				el := d.get(k)
				if el == nil {
					return d.err
				}
				if el.exists && el.kind != fsm.KindList {
					reply = errWrongType
					return nil
				}
				if !el.exists {
					continue
				}
				var v string
				if left {
					v, el.l.items = el.l.items[0], el.l.items[1:]
				} else {
					n := len(el.l.items) - 1
					v, el.l.items = el.l.items[n], el.l.items[:n]
				}
				d.mutated(el)
				reply = Array{Bulk(k), Bulk(v)}
				return d.flush()
			}
			return nil
		})
		switch {
		case err != nil:
			return nil, err
		case reply != nil:
			return reply, nil
		}
		select {
		case <-ctx.Done():
			return NilArray{}, nil
		case <-end:
			return NilArray{}, nil
		case <-time.After(blockPoll):
		}
	}
}

// Spec describes a command as Redis's COMMAND reports it.
type Spec struct {
	Arity             int
	Flags             []string
	First, Last, Step int
	Group, Summary    string
}

// Describe returns the Spec of the command named name (lower case).
func Describe(name string) (Spec, bool) {
	cmd, ok := commands[name]
	if !ok {
		return Spec{}, false
	}
	s := Spec{Arity: cmd.arity, First: cmd.first, Last: cmd.last, Step: cmd.step, Group: cmd.group, Summary: cmd.summary}
	for _, f := range []struct {
		flag flags
		name string
	}{{fWrite, "write"}, {fReadOnly, "readonly"}, {fNoScript, "noscript"}, {fFast, "fast"}, {fMovableKy, "movablekeys"}} {
		if cmd.flags&f.flag != 0 {
			s.Flags = append(s.Flags, f.name)
		}
	}
	return s, true
}
