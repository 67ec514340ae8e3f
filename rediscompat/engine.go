package rediscompat

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/server"
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
	}
	if cmd.flags&fBlocking != 0 {
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
	}{{fWrite, "write"}, {fReadOnly, "readonly"}, {fNoScript, "noscript"}, {fFast, "fast"}, {fMovableKy, "movablekeys"}, {fBlocking, "blocking"}} {
		if cmd.flags&f.flag != 0 {
			s.Flags = append(s.Flags, f.name)
		}
	}
	return s, true
}
