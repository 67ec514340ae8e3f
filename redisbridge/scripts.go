package redisbridge

import (
	"crypto/sha1"
	"encoding/hex"
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
	// after holds what the script does outside the lock table (publish, a
	// Redisson unlock latch): it is done once, after its entry committed.
	after []func()
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

// then adds fn to what is done once the script's entry has committed.
func (sc *scriptCall) then(fn func()) { sc.after = append(sc.after, fn) }

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
	// The whole script is one transaction: one entry, all or nothing, so
	// that no part of it is ever done twice (docs/design.md, invariant 6).
	var res scriptResult
	err = b.locker.Update(ctx, sc.keys, func(tx *server.Tx) error {
		sc.after = sc.after[:0]
		var err error
		res, err = b.runKind(tx, s.kind, sc)
		return err
	})
	if err != nil {
		if e, ok := err.(errScriptArg); ok {
			r.c.WriteError(e.msg)
			return
		}
		b.fail(ctx, r, err)
		return
	}
	for _, fn := range sc.after {
		fn()
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

// lockTx is what a command of several steps works on: the leader's
// transaction (server.Tx), which commits all of them as one entry.
type lockTx interface {
	Status(key string) (server.Status, bool, error)
	Acquire(key, owner string, ttl time.Duration, redis bool) (bool, error)
	Extend(key, owner string, ttl time.Duration) (bool, error)
	Release(key, owner string, redis bool) (bool, error)
	Revoke(key string) (bool, error)
	Rollback()
}

// txAcquire takes key for value in tx, with the semantics the
// configuration chooses (see lockAcquire).
func (b *Bridge) txAcquire(tx lockTx, key, value string, ttl time.Duration) (bool, error) {
	return tx.Acquire(key, value, ttl, !b.cfg.RedlockMultiEndpoint)
}

// txRelease frees key in tx if value holds it. With RedlockMultiEndpoint,
// a repeated release of a release that is remembered reports true as well.
func (b *Bridge) txRelease(tx lockTx, key, value string) (bool, error) {
	return tx.Release(key, value, !b.cfg.RedlockMultiEndpoint)
}

// runKind performs one script in tx.
func (b *Bridge) runKind(tx lockTx, kind scriptKind, sc *scriptCall) (scriptResult, error) {
	switch kind {
	case delValue, delValueOrExpired:
		ok, err := b.txRelease(tx, sc.keys[0], string(sc.argv[0]))
		if err != nil || ok || kind == delValue {
			return boolInt(ok), err
		}
		if _, held, err := tx.Status(sc.keys[0]); err != nil || !held {
			return int64(-1), err
		}
		return int64(0), nil
	case extendValue, extendOrAcquire:
		ttl, ok := sc.millis(2)
		if !ok {
			return nil, errNotInteger
		}
		ok, err := tx.Extend(sc.keys[0], string(sc.argv[0]), ttl)
		if err != nil || ok || kind == extendValue {
			return boolInt(ok), err
		}
		ok, err = b.txAcquire(tx, sc.keys[0], string(sc.argv[0]), ttl)
		return boolInt(ok), err
	case extendAdd, extendAddOrReplace:
		return b.extendRedisPy(tx, kind, sc)
	case acquireAll:
		return b.acquireAll(tx, sc)
	case releaseAll:
		n := int64(0)
		for _, k := range sc.keys {
			ok, err := b.txRelease(tx, k, string(sc.argv[0]))
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
			ok, err := tx.Extend(k, string(sc.argv[0]), ttl)
			if err != nil || !ok {
				// The script checks every key before it renews any.
				tx.Rollback()
				return int64(0), err
			}
		}
		return int64(len(sc.keys)), nil
	}
	return b.runRedisson(tx, kind, sc)
}

// extendRedisPy is redis-py's extend: the new lease is the remaining time
// plus ARGV[2] ms, or ARGV[2] ms if ARGV[3] is not "0".
func (b *Bridge) extendRedisPy(tx lockTx, kind scriptKind, sc *scriptCall) (scriptResult, error) {
	add, ok := sc.int(2)
	if !ok {
		return nil, errNotInteger
	}
	key, value := sc.keys[0], string(sc.argv[0])
	s, held, err := tx.Status(key)
	if err != nil || !held || s.Owner != value {
		return int64(0), err
	}
	ttl := time.Duration(add) * time.Millisecond
	if kind == extendAdd || string(sc.argv[2]) == "0" {
		ttl += s.Remaining
	}
	if ttl <= 0 {
		// PEXPIRE with a time in the past deletes the key.
		ok, err := b.txRelease(tx, key, value)
		return boolInt(ok), err
	}
	ok, err = tx.Extend(key, value, ttl)
	return boolInt(ok), err
}

// acquireAll is node-redlock's acquire: every key for ARGV[1], or none. A
// key held by another owner (or, with Redis's semantics, by anyone) refuses
// the whole request; so does a key that acquires wait for.
func (b *Bridge) acquireAll(tx lockTx, sc *scriptCall) (scriptResult, error) {
	value := string(sc.argv[0])
	ttl, ok := sc.millis(2)
	if !ok {
		return nil, errNotInteger
	}
	for _, k := range uniqueKeys(sc.keys) {
		ok, err := b.txAcquire(tx, k, value, ttl)
		if err != nil || !ok {
			tx.Rollback()
			return int64(0), err
		}
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
