package redisbridge

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/server"
)

// fencer runs no Lua. EVAL and EVALSHA recognise the lock scripts of the
// Redlock clients by the SHA1 of their exact text (scripttexts.go) and run
// what each one does as calls on the server.

// scriptKind is what a known script does.
type scriptKind int

const (
	delValue            scriptKind = iota // delete KEYS[1] if it holds ARGV[1]: 1 or 0
	delValueOrExpired                     // the same, but -1 if the key is free (redsync 4.12+)
	extendValue                           // PEXPIRE KEYS[1] ARGV[2] if it holds ARGV[1]
	extendOrAcquire                       // extendValue, else SET KEYS[1] ARGV[1] PX ARGV[2] NX
	extendAdd                             // redis-py: remaining + ARGV[2] ms if it holds ARGV[1]
	extendAddOrReplace                    // redis-py: ARGV[3] "0" adds ARGV[2] to the remaining time, else replaces it
	acquireAll                            // node-redlock: every key or none, for ARGV[1], ARGV[2] ms: #KEYS or 0
	releaseAll                            // node-redlock: delete the keys ARGV[1] holds: how many
	extendAll                             // node-redlock: renew every key if ARGV[1] holds them all: #KEYS or 0
	redissonLock                          // Redisson: take or re-enter; nil, or the holder's PTTL
	redissonUnlockOld                     // Redisson before 3.10.6: unlock, 1 (and publish) also if free
	redissonUnlock                        // Redisson: leave once; 0 still held, 1 freed (published), nil not holder
	redissonUnlockLatch                   // the same, remembering the answer under KEYS[3] for retries
	redissonForceUnlock                   // Redisson: free whoever holds it, publish: 1 or 0
	redissonRenew                         // Redisson watchdog: renew if ARGV[2] holds it: 1 or 0
	redissonRenewBatch                    // Redisson 3.44+ watchdog: renew each KEYS[i] held by ARGV[i+1]
)

// knownScript is one recognised script.
type knownScript struct {
	library string
	kind    scriptKind
	// keys is how many keys the script takes, -1 for one or more; args is
	// how many arguments it needs at least.
	keys, args int
}

// scriptShape gives each kind's keys and arguments.
var scriptShape = map[scriptKind][2]int{
	delValue: {1, 1}, delValueOrExpired: {1, 1}, extendValue: {1, 2}, extendOrAcquire: {1, 2},
	extendAdd: {1, 2}, extendAddOrReplace: {1, 3}, acquireAll: {-1, 2}, releaseAll: {-1, 1}, extendAll: {-1, 2},
	redissonLock: {1, 2}, redissonUnlockOld: {2, 3}, redissonUnlock: {2, 3}, redissonUnlockLatch: {3, 5},
	redissonForceUnlock: {2, 1}, redissonRenew: {1, 2}, redissonRenewBatch: {-1, 1},
}

// scriptsBySHA maps the lowercase hex SHA1 of each known text to it.
var scriptsBySHA = func() map[string]knownScript {
	m := make(map[string]knownScript, len(knownScripts))
	for _, s := range knownScripts {
		shape := scriptShape[s.kind]
		m[scriptSHA([]byte(s.text))] = knownScript{library: s.library, kind: s.kind, keys: shape[0], args: shape[1]}
	}
	return m
}()

func scriptSHA(text []byte) string {
	sum := sha1.Sum(text)
	return hex.EncodeToString(sum[:])
}

// supportedScripts names the libraries whose scripts are known, for errors.
const supportedScripts = "go-redsync/redsync v4, node-redlock v4 and v5, redis-py Lock, Redisson RLock"

// eval: EVAL script numkeys [key ...] [arg ...].
func (b *Bridge) eval(r *request) {
	if len(r.args) < 3 {
		wrongArity(r)
		return
	}
	sha := scriptSHA(r.args[1])
	s, ok := scriptsBySHA[sha]
	if !ok {
		r.c.WriteError(fmt.Sprintf("ERR fencer runs no Lua: this script (sha1 %s) is not one of the lock scripts it knows (%s); see docs/redlock.md", sha, supportedScripts))
		return
	}
	b.runScript(r, s)
}

// evalsha: EVALSHA sha1 numkeys [key ...] [arg ...]. Every known script is
// always loaded, as if by SCRIPT LOAD.
func (b *Bridge) evalsha(r *request) {
	if len(r.args) < 3 {
		wrongArity(r)
		return
	}
	s, ok := scriptsBySHA[strings.ToLower(string(r.args[1]))]
	if !ok {
		r.c.WriteError("NOSCRIPT No matching script. Please use EVAL.")
		return
	}
	b.runScript(r, s)
}

// script: SCRIPT LOAD text | SCRIPT EXISTS sha1 ... | SCRIPT FLUSH.
func (b *Bridge) script(r *request) {
	if len(r.args) < 2 {
		wrongArity(r)
		return
	}
	sub := strings.ToLower(string(r.args[1]))
	switch {
	case sub == "load" && len(r.args) == 3:
		sha := scriptSHA(r.args[2])
		if _, ok := scriptsBySHA[sha]; !ok {
			r.c.WriteError(fmt.Sprintf("ERR fencer runs no Lua: this script (sha1 %s) is not one of the lock scripts it knows (%s); see docs/redlock.md", sha, supportedScripts))
			return
		}
		r.c.WriteBulkString(sha)
	case sub == "exists" && len(r.args) >= 3:
		r.c.WriteArray(len(r.args) - 2)
		for _, a := range r.args[2:] {
			_, ok := scriptsBySHA[strings.ToLower(string(a))]
			if ok {
				r.c.WriteInt(1)
			} else {
				r.c.WriteInt(0)
			}
		}
	case sub == "flush" && len(r.args) <= 3:
		// The known scripts are built in; there is nothing to forget.
		r.c.WriteString("OK")
	case sub == "load" || sub == "exists" || sub == "flush":
		r.c.WriteError(fmt.Sprintf("ERR wrong number of arguments for 'script|%s' command", sub))
	default:
		r.c.WriteError(fmt.Sprintf("ERR unknown subcommand '%s'. Try SCRIPT HELP.", truncate(r.args[1], 128)))
	}
}

// scriptCall is one run of a known script.
type scriptCall struct {
	keys []string
	argv [][]byte
}

// int parses ARGV[i] (1-based) as an integer.
func (sc *scriptCall) int(i int) (int64, bool) {
	v, err := strconv.ParseInt(string(sc.argv[i-1]), 10, 64)
	return v, err == nil
}

// millis parses ARGV[i] as a positive number of milliseconds.
func (sc *scriptCall) millis(i int) (time.Duration, bool) {
	v, ok := sc.int(i)
	if !ok || v > maxMillis {
		return 0, false
	}
	return time.Duration(v) * time.Millisecond, true
}

// scriptResult is what a script returns: nil, an int64 or a []int64.
type scriptResult any

// errScriptArg is a script argument the script would reject.
type errScriptArg struct{ msg string }

func (e errScriptArg) Error() string { return e.msg }

func (b *Bridge) runScript(r *request, s knownScript) {
	numkeys, err := strconv.ParseInt(string(r.args[2]), 10, 64)
	switch {
	case err != nil:
		r.c.WriteError("ERR value is not an integer or out of range")
		return
	case numkeys < 0:
		r.c.WriteError("ERR Number of keys can't be negative")
		return
	case numkeys > int64(len(r.args)-3):
		r.c.WriteError("ERR Number of keys can't be greater than number of args")
		return
	}
	sc := &scriptCall{argv: r.args[3+numkeys:]}
	for _, k := range r.args[3 : 3+numkeys] {
		sc.keys = append(sc.keys, string(k))
	}
	if s.keys >= 0 && len(sc.keys) != s.keys || s.keys < 0 && len(sc.keys) == 0 || len(sc.argv) < s.args {
		want := fmt.Sprintf("%d keys", s.keys)
		if s.keys < 0 {
			want = "one or more keys"
		}
		r.c.WriteError(fmt.Sprintf("ERR this %s script takes %s and at least %d arguments, got %d keys and %d arguments",
			s.library, want, s.args, len(sc.keys), len(sc.argv)))
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	res, err := b.runKind(ctx, s.kind, sc)
	if err != nil {
		if e, ok := err.(errScriptArg); ok {
			r.c.WriteError(e.msg)
			return
		}
		if ctx.Err() != nil && !errors.Is(err, server.ErrUnknownOutcome) {
			// A script may be several commands, and the deadline may have
			// passed after some of them took effect: TIMEOUT would say
			// that none did.
			err = fmt.Errorf("%w: the request's deadline passed during a script of several steps: %v", server.ErrUnknownOutcome, err)
		}
		b.fail(ctx, r, err)
		return
	}
	switch v := res.(type) {
	case nil:
		r.null()
	case int64:
		r.c.WriteInt64(v)
	case []int64:
		r.c.WriteArray(len(v))
		for _, n := range v {
			r.c.WriteInt64(n)
		}
	}
}

var errNotInteger = errScriptArg{"ERR value is not an integer or out of range"}

func boolInt(ok bool) int64 {
	if ok {
		return 1
	}
	return 0
}

// runKind performs one script.
func (b *Bridge) runKind(ctx context.Context, kind scriptKind, sc *scriptCall) (scriptResult, error) {
	switch kind {
	case delValue, delValueOrExpired:
		ok, err := b.lockRelease(ctx, sc.keys[0], string(sc.argv[0]))
		if err != nil || ok || kind == delValue {
			return boolInt(ok), err
		}
		if _, held, err := b.locker.Status(ctx, sc.keys[0]); err != nil || !held {
			return int64(-1), err
		}
		return int64(0), nil
	case extendValue, extendOrAcquire:
		ttl, ok := sc.millis(2)
		if !ok {
			return nil, errNotInteger
		}
		ok, err := b.locker.Extend(ctx, sc.keys[0], string(sc.argv[0]), ttl)
		if err != nil || ok || kind == extendValue {
			return boolInt(ok), err
		}
		ok, err = b.lockAcquire(ctx, sc.keys[0], string(sc.argv[0]), ttl)
		return boolInt(ok), err
	case extendAdd, extendAddOrReplace:
		return b.extendRedisPy(ctx, kind, sc)
	case acquireAll:
		return b.acquireAll(ctx, sc)
	case releaseAll:
		n := int64(0)
		for _, k := range sc.keys {
			ok, err := b.lockRelease(ctx, k, string(sc.argv[0]))
			if err != nil {
				return nil, err
			}
			n += boolInt(ok)
		}
		return n, nil
	case extendAll:
		ttl, ok := sc.millis(2)
		if !ok {
			return nil, errNotInteger
		}
		for _, k := range sc.keys {
			ok, err := b.locker.Extend(ctx, k, string(sc.argv[0]), ttl)
			if err != nil || !ok {
				return int64(0), err
			}
		}
		return int64(len(sc.keys)), nil
	}
	return b.runRedisson(ctx, kind, sc)
}

// extendRedisPy is redis-py's extend: the new lease is the remaining time
// plus ARGV[2] ms, or ARGV[2] ms if ARGV[3] is not "0".
func (b *Bridge) extendRedisPy(ctx context.Context, kind scriptKind, sc *scriptCall) (scriptResult, error) {
	add, ok := sc.int(2)
	if !ok {
		return nil, errNotInteger
	}
	key, value := sc.keys[0], string(sc.argv[0])
	ttl := time.Duration(add) * time.Millisecond
	if kind == extendAdd || string(sc.argv[2]) == "0" {
		s, held, err := b.locker.Status(ctx, key)
		if err != nil || !held || s.Owner != value {
			return int64(0), err
		}
		ttl += s.Remaining
	}
	if ttl <= 0 {
		// PEXPIRE with a time in the past deletes the key.
		ok, err := b.lockRelease(ctx, key, value)
		return boolInt(ok), err
	}
	ok, err := b.locker.Extend(ctx, key, value, ttl)
	return boolInt(ok), err
}

// acquireAll is node-redlock's acquire: every key for ARGV[1], or none.
// With more than one key the keys are first read, so that a lock held by
// another owner refuses the whole request before anything is taken. If one
// is taken in between, the keys this request took are given back (with
// Redis's semantics, where each was a fresh grant); with
// RedlockMultiEndpoint they are left to the client's release or their
// lease, because one of them may be the same value's grant made through
// another node.
func (b *Bridge) acquireAll(ctx context.Context, sc *scriptCall) (scriptResult, error) {
	value := string(sc.argv[0])
	ttl, ok := sc.millis(2)
	if !ok {
		return nil, errNotInteger
	}
	keys := uniqueKeys(sc.keys)
	if len(keys) > 1 {
		for _, k := range keys {
			s, held, err := b.locker.Status(ctx, k)
			if err != nil {
				return nil, err
			}
			if held && (s.Owner != value || !b.cfg.RedlockMultiEndpoint) {
				return int64(0), nil
			}
		}
	}
	for i, k := range keys {
		ok, err := b.lockAcquire(ctx, k, value, ttl)
		if err == nil && ok {
			continue
		}
		if !b.cfg.RedlockMultiEndpoint && i > 0 {
			// A context of its own: the request's may be what ended.
			rctx, cancel := b.requestCtx(0)
			for _, taken := range keys[:i] {
				_, _ = b.locker.ReleaseRedis(rctx, taken, value)
			}
			cancel()
		}
		return int64(0), err
	}
	return int64(len(sc.keys)), nil
}

func uniqueKeys(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := keys[:0:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}
