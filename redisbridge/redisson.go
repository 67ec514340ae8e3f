package redisbridge

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Redisson's RLock keeps a hash per lock: field owner ("uuid:threadId"),
// value the hold count (the lock is reentrant), and publishes on the lock's
// channel when it is freed. Here the lock is a fencer lock owned by that
// field, always with Redis's semantics (Redisson reuses its owner string
// across lock and unlock, so a remembered release would lock it out), and a
// hold count above one is kept as further locks by the same owner on hidden
// keys, holdKey(key, 2..n): they are replicated like any lock, so the count
// survives a leader change, and they are renewed and freed with the lock.

// maxHolds bounds how deep a Redisson lock may be re-entered. Every hold is
// a key that one entry renews or frees with the lock, so the entry of the
// deepest lock (with the longest key and owner) must stay under
// fsm.MaxEntrySize.
const maxHolds = 64

// holdKey names the lock that records the n-th hold (n >= 2) of key.
func holdKey(key string, n int) string {
	return "\x00fencer-hold\x00" + key + "\x00" + strconv.Itoa(n)
}

// holdCount returns how many times owner, which holds key, holds it.
func holdCount(tx lockTx, key, owner string) (int, error) {
	n := 1
	for ; n < maxHolds; n++ {
		s, held, err := tx.Status(holdKey(key, n+1))
		if err != nil {
			return 0, err
		}
		if !held || s.Owner != owner {
			break
		}
	}
	return n, nil
}

// extendHolds renews owner's hold records of key 2..upto for ttl.
func extendHolds(tx lockTx, key, owner string, upto int, ttl time.Duration) error {
	for i := 2; i <= upto; i++ {
		if _, err := tx.Extend(holdKey(key, i), owner, ttl); err != nil {
			return err
		}
	}
	return nil
}

// dropHolds frees every hold record of key, whoever made it: the lock
// itself was just freed or freshly granted.
func dropHolds(tx lockTx, key string) error {
	for i := 2; i <= maxHolds; i++ {
		_, held, err := tx.Status(holdKey(key, i))
		if err != nil || !held {
			return err
		}
		if _, err := tx.Revoke(holdKey(key, i)); err != nil {
			return err
		}
	}
	return nil
}

// revokeLock frees key whoever holds it, with the Redisson hold counts kept
// beside it, as DEL does.
func revokeLock(tx lockTx, key string) (bool, error) {
	ok, err := tx.Revoke(key)
	if err != nil || !ok {
		return ok, err
	}
	return true, dropHolds(tx, key)
}

// runRedisson performs one of Redisson's lock scripts in tx.
func (b *Bridge) runRedisson(tx lockTx, kind scriptKind, sc *scriptCall) (scriptResult, error) {
	switch kind {
	case redissonLock:
		lease, ok := sc.millis(1)
		if !ok {
			return nil, errNotInteger
		}
		return takeRedissonLock(tx, sc.keys[0], string(sc.argv[1]), lease)
	case redissonUnlockOld, redissonUnlock, redissonUnlockLatch:
		return b.redissonUnlock(tx, kind, sc)
	case redissonForceUnlock:
		shard := false
		if len(sc.argv) > 1 {
			var err error
			if shard, err = publishKind(sc.argv[1]); err != nil {
				return nil, err
			}
		}
		ok, err := revokeLock(tx, sc.keys[0])
		if err == nil && ok {
			channel, msg := sc.keys[1], sc.argv[0]
			sc.then(func() { b.publishAll(shard, channel, msg) })
		}
		return boolInt(ok), err
	case redissonRenew:
		lease, ok := sc.millis(1)
		if !ok {
			return nil, errNotInteger
		}
		ok, err := renewRedissonLock(tx, sc.keys[0], string(sc.argv[1]), lease)
		return boolInt(ok), err
	case redissonRenewBatch:
		lease, ok := sc.millis(1)
		if !ok {
			return nil, errNotInteger
		}
		if len(sc.argv) < len(sc.keys)+1 {
			return nil, errScriptArg{fmt.Sprintf("ERR this Redisson renewal script needs one owner per key: %d keys, %d owners", len(sc.keys), len(sc.argv)-1)}
		}
		out := make([]int64, len(sc.keys))
		for i, k := range sc.keys {
			ok, err := renewRedissonLock(tx, k, string(sc.argv[i+1]), lease)
			if err != nil {
				return nil, err
			}
			out[i] = boolInt(ok)
		}
		return out, nil
	}
	return nil, errScriptArg{fmt.Sprintf("ERR internal: no handler for script kind %d", kind)}
}

// publishKind checks the publish command a Redisson script names.
func publishKind(cmd []byte) (shard bool, err error) {
	switch strings.ToLower(string(cmd)) {
	case "publish":
		return false, nil
	case "spublish":
		return true, nil
	}
	return false, errScriptArg{fmt.Sprintf("ERR this Redisson script may publish with PUBLISH or SPUBLISH, not %q", cmd)}
}

// takeRedissonLock takes key for owner, or enters it once more if owner holds
// it: nil. If another owner holds it: its remaining time in ms.
func takeRedissonLock(tx lockTx, key, owner string, lease time.Duration) (scriptResult, error) {
	s, held, err := tx.Status(key)
	if err != nil {
		return nil, err
	}
	if held && s.Owner == owner {
		n, err := holdCount(tx, key, owner)
		if err != nil {
			return nil, err
		}
		if n >= maxHolds {
			return nil, errScriptArg{fmt.Sprintf("ERR fencer keeps at most %d holds of one Redisson lock", maxHolds)}
		}
		if ok, err := takeHold(tx, holdKey(key, n+1), owner, lease); err != nil || !ok {
			return int64(1), err
		}
		if _, err := tx.Extend(key, owner, lease); err != nil {
			return nil, err
		}
		return nil, extendHolds(tx, key, owner, n, lease)
	}
	if held {
		return max(s.Remaining.Milliseconds(), 1), nil
	}
	ok, err := tx.Acquire(key, owner, lease, true)
	if err != nil {
		return nil, err
	}
	if ok {
		// Hold records left by an earlier holder whose lease ran out count
		// for nobody now.
		return nil, dropHolds(tx, key)
	}
	// Free, but acquires wait for it (WAIT): they come first.
	return int64(1), nil
}

// takeHold records one more hold. A record left by an earlier holder of the
// lock (whose lease ran out) is freed first.
func takeHold(tx lockTx, hk, owner string, lease time.Duration) (bool, error) {
	s, held, err := tx.Status(hk)
	if err != nil || held && s.Owner == owner {
		return false, err
	}
	if held {
		if _, err := tx.Revoke(hk); err != nil {
			return false, err
		}
	}
	return tx.Acquire(hk, owner, lease, true)
}

// renewRedissonLock renews owner's lease of key and its hold records.
func renewRedissonLock(tx lockTx, key, owner string, lease time.Duration) (bool, error) {
	ok, err := tx.Extend(key, owner, lease)
	if err != nil || !ok {
		return false, err
	}
	n, err := holdCount(tx, key, owner)
	if err != nil {
		return false, err
	}
	return true, extendHolds(tx, key, owner, n, lease)
}

// redissonUnlock leaves key once: 0 if owner still holds it, 1 if it was
// freed (and the unlock message published), nil if owner does not hold it.
// KEYS: lock, channel[, latch]; ARGV: message, lease, owner[, publish
// command, latch ms].
func (b *Bridge) redissonUnlock(tx lockTx, kind scriptKind, sc *scriptCall) (scriptResult, error) {
	key, channel, msg, owner := sc.keys[0], sc.keys[1], sc.argv[0], string(sc.argv[2])
	lease, ok := sc.millis(2)
	if !ok {
		return nil, errNotInteger
	}
	shard := false
	var latchKey string
	var latchFor time.Duration
	if kind == redissonUnlockLatch || len(sc.argv) >= 4 {
		var err error
		if shard, err = publishKind(sc.argv[3]); err != nil {
			return nil, err
		}
	}
	if kind == redissonUnlockLatch {
		latchKey = sc.keys[2]
		if latchFor, ok = sc.millis(5); !ok {
			return nil, errNotInteger
		}
		// A retried unlock gets the answer the first one got.
		if v, ok := b.latch.get(latchKey); ok {
			return v, nil
		}
	}
	publish := func() { b.publishAll(shard, channel, msg) }
	s, held, err := tx.Status(key)
	if err != nil {
		return nil, err
	}
	if !held && kind == redissonUnlockOld {
		sc.then(publish)
		return int64(1), nil
	}
	if !held || s.Owner != owner {
		return nil, nil
	}
	n, err := holdCount(tx, key, owner)
	if err != nil {
		return nil, err
	}
	if n > 1 {
		if _, err := tx.Release(holdKey(key, n), owner, true); err != nil {
			return nil, err
		}
		if _, err := tx.Extend(key, owner, lease); err != nil {
			return nil, err
		}
		if err := extendHolds(tx, key, owner, n-1, lease); err != nil {
			return nil, err
		}
		sc.then(func() { b.latch.set(latchKey, 0, latchFor) })
		return int64(0), nil
	}
	ok, err = tx.Release(key, owner, true)
	if err != nil || !ok {
		return nil, err
	}
	sc.then(publish)
	sc.then(func() { b.latch.set(latchKey, 1, latchFor) })
	return int64(1), nil
}

// latches remembers the answers of Redisson's unlocks under their latch
// keys (redisson_unlock_latch:{lock}:requestId) for the time the script
// asks, so that a retried unlock is answered the same; Redisson deletes
// the latch with DEL once it has its answer. They live on the node that ran
// the unlock (the leader) and are lost with it: a retry through a new
// leader then sees the lock as not held by the caller.
type latches struct {
	mu sync.Mutex
	m  map[string]latchValue
}

type latchValue struct {
	v     int64
	until time.Time
}

// maxLatches bounds the remembered unlock answers.
const maxLatches = 100000

func newLatches() *latches { return &latches{m: make(map[string]latchValue)} }

func (l *latches) get(key string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[key]
	if !ok || time.Now().After(v.until) {
		delete(l.m, key)
		return 0, false
	}
	return v.v, true
}

func (l *latches) set(key string, v int64, d time.Duration) {
	if key == "" || d <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if len(l.m) >= maxLatches {
		for k, lv := range l.m {
			if now.After(lv.until) {
				delete(l.m, k)
			}
		}
		if len(l.m) >= maxLatches {
			return
		}
	}
	l.m[key] = latchValue{v: v, until: now.Add(d)}
}

// del forgets key and reports whether it was remembered.
func (l *latches) del(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.m[key]
	delete(l.m, key)
	return ok && time.Now().Before(v.until)
}
