package redisbridge

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/server"
)

// The Redis commands Redlock clients send, mapped to locks: a key is a lock,
// its value is the owner. By default they keep Redis's semantics (a second
// SET NX is refused even with the same value, a release is not remembered);
// with Config.RedlockMultiEndpoint, acquire and release use the native,
// idempotent semantics instead.

// errNotLockSet is the answer to a SET that is not a lock acquire.
const errNotLockSet = "ERR fencer supports SET only as a lock acquire: SET key value NX [PX milliseconds|EX seconds]"

// lockAcquire takes key for value, with the semantics the configuration
// chooses.
func (b *Bridge) lockAcquire(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	if b.cfg.RedlockMultiEndpoint {
		_, ok, err := b.locker.Acquire(ctx, key, value, ttl, 0)
		return ok, err
	}
	_, ok, err := b.locker.AcquireRedis(ctx, key, value, ttl)
	return ok, err
}

// parseExpire parses a relative expiry of a SET, PEXPIRE or EXPIRE, in
// seconds or milliseconds, as Redis does: junk is not an integer, zero,
// negative or overflowing is an invalid expire time (for SET).
func parseExpire(arg []byte, unit time.Duration) (time.Duration, string) {
	v, err := strconv.ParseInt(string(arg), 10, 64)
	if err != nil {
		return 0, "ERR value is not an integer or out of range"
	}
	if v > int64(1<<63-1)/int64(unit) || v < -int64(1<<63-1)/int64(unit) {
		return 0, "overflow"
	}
	return time.Duration(v) * unit, ""
}

// set: SET key value NX [PX ms | EX s] (options in any order) → OK if the
// lock was taken, null if it is held.
func (b *Bridge) set(r *request) {
	if len(r.args) < 3 {
		wrongArity(r)
		return
	}
	var nx, xx, get, keepttl bool
	var expire []byte
	unit := time.Duration(0)
	for i := 3; i < len(r.args); i++ {
		opt := strings.ToUpper(string(r.args[i]))
		switch {
		case opt == "NX" && !xx:
			nx = true
		case opt == "XX" && !nx:
			xx = true
		case opt == "GET":
			get = true
		case opt == "KEEPTTL" && unit == 0:
			keepttl = true
		case (opt == "PX" || opt == "EX" || opt == "PXAT" || opt == "EXAT") && unit == 0 && !keepttl && i+1 < len(r.args):
			unit = time.Millisecond
			if opt == "EX" || opt == "EXAT" {
				unit = time.Second
			}
			if strings.HasSuffix(opt, "AT") {
				r.c.WriteError(errNotLockSet)
				return
			}
			expire = r.args[i+1]
			i++
		default:
			r.c.WriteError("ERR syntax error")
			return
		}
	}
	ttl := b.cfg.DefaultLockTTL
	if expire != nil {
		d, msg := parseExpire(expire, unit)
		switch {
		case msg == "overflow" || msg == "" && d <= 0:
			r.c.WriteError("ERR invalid expire time in 'set' command")
			return
		case msg != "":
			r.c.WriteError(msg)
			return
		}
		ttl = d
	}
	if !nx || xx || get || keepttl {
		r.c.WriteError(errNotLockSet)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	ok, err := b.lockAcquire(ctx, string(r.args[1]), string(r.args[2]), ttl)
	switch {
	case err != nil:
		b.fail(ctx, r, err)
	case ok:
		r.c.WriteString("OK")
	default:
		r.null()
	}
}

// setnx: SETNX key value → 1 taken for the default lock TTL, 0 held.
func (b *Bridge) setnx(r *request) {
	if len(r.args) != 3 {
		wrongArity(r)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	ok, err := b.lockAcquire(ctx, string(r.args[1]), string(r.args[2]), b.cfg.DefaultLockTTL)
	b.writeBool(ctx, r, ok, err)
}

// get: GET key → the value (owner) holding the lock, or null if it is free.
func (b *Bridge) get(r *request) {
	if len(r.args) != 2 {
		wrongArity(r)
		return
	}
	b.withStatus(r, r.null, func(s server.Status) { r.c.WriteBulkString(s.Owner) })
}

// del: DEL key [key ...] → how many held locks were freed. Owner-less: it
// frees a lock whoever holds it, so it is outside fencer's guarantees. All
// the keys are freed in one entry (with the Redisson hold counts beside
// them), and their waiters handed them in it.
func (b *Bridge) del(r *request) {
	if len(r.args) < 2 {
		wrongArity(r)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	n := 0
	var keys []string
	for _, k := range r.args[1:] {
		if b.latch.del(string(k)) {
			n++
			continue
		}
		keys = append(keys, string(k))
	}
	if len(keys) > 0 {
		freed := 0
		err := b.locker.Update(ctx, keys, func(tx *server.Tx) error {
			freed = 0
			for _, k := range keys {
				ok, err := revokeLock(tx, k)
				if err != nil {
					return err
				}
				if ok {
					freed++
				}
			}
			return nil
		})
		if err != nil {
			b.fail(ctx, r, err)
			return
		}
		n += freed
	}
	r.c.WriteInt(n)
}

// exists: EXISTS key [key ...] → how many of the keys are held locks (a key
// named twice counts twice), read together.
func (b *Bridge) exists(r *request) {
	if len(r.args) < 2 {
		wrongArity(r)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	keys := make([]string, len(r.args)-1)
	for i, k := range r.args[1:] {
		keys[i] = string(k)
	}
	n := 0
	err := b.locker.Update(ctx, nil, func(tx *server.Tx) error {
		n = 0
		for _, k := range keys {
			_, held, err := tx.Status(k)
			if err != nil {
				return err
			}
			if held {
				n++
			}
		}
		return nil
	})
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.c.WriteInt(n)
}

func (b *Bridge) pexpire(r *request) { b.expireIn(r, time.Millisecond) }
func (b *Bridge) expire(r *request)  { b.expireIn(r, time.Second) }

// expireIn: PEXPIRE key ms [NX|XX|GT|LT] (EXPIRE in seconds) → 1 if the
// holder's lease was set, 0 if the key is free or the option said no. It
// renews whoever holds the key; a time of zero or less frees it, as in
// Redis. Owner-less, so outside fencer's guarantees.
func (b *Bridge) expireIn(r *request, unit time.Duration) {
	if len(r.args) < 3 {
		wrongArity(r)
		return
	}
	ttl, msg := parseExpire(r.args[2], unit)
	if msg == "overflow" {
		r.c.WriteError(fmt.Sprintf("ERR invalid expire time in '%s' command", strings.ToLower(string(r.args[0]))))
		return
	}
	if msg != "" {
		r.c.WriteError(msg)
		return
	}
	var nx, xx, gt, lt bool
	for _, a := range r.args[3:] {
		switch strings.ToUpper(string(a)) {
		case "NX":
			nx = true
		case "XX":
			xx = true
		case "GT":
			gt = true
		case "LT":
			lt = true
		default:
			r.c.WriteError(fmt.Sprintf("ERR Unsupported option %s", a))
			return
		}
	}
	if nx && (xx || gt || lt) {
		r.c.WriteError("ERR NX and XX, GT or LT options at the same time are not compatible")
		return
	}
	if gt && lt {
		r.c.WriteError("ERR GT and LT options at the same time are not compatible")
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	key := string(r.args[1])
	// Read and write in one entry: the holder renewed (or freed) is the
	// one read, and nothing is done twice.
	var set bool
	err := b.locker.Update(ctx, []string{key}, func(tx *server.Tx) error {
		set = false
		s, held, err := tx.Status(key)
		// Every lock has a lease, so NX (only without one) never applies.
		if err != nil || !held || nx || gt && ttl <= s.Remaining || lt && ttl >= s.Remaining {
			return err
		}
		if ttl <= 0 {
			set, err = revokeLock(tx, key)
			return err
		}
		// Renew the holder, and its Redisson holds as the hash they stand
		// for would be.
		if set, err = tx.Extend(key, s.Owner, ttl); err != nil || !set {
			return err
		}
		n, err := holdCount(tx, key, s.Owner)
		if err != nil {
			return err
		}
		return extendHolds(tx, key, s.Owner, n, ttl)
	})
	b.writeBool(ctx, r, set, err)
}

func (b *Bridge) pttl(r *request) { b.ttlIn(r, time.Millisecond) }
func (b *Bridge) ttl(r *request)  { b.ttlIn(r, time.Second) }

// ttlIn: PTTL key (TTL in seconds) → the remaining lease on the leader's
// clock, or -2 if the key is free. Never -1: no lock lives forever.
func (b *Bridge) ttlIn(r *request, unit time.Duration) {
	if len(r.args) != 2 {
		wrongArity(r)
		return
	}
	b.withStatus(r, func() { r.c.WriteInt(-2) }, func(s server.Status) {
		r.c.WriteInt64(max(int64((s.Remaining+unit/2)/unit), 1))
	})
}

// hexists: HEXISTS key field → 1 if field holds the lock key. Redisson asks
// this (isHeldByThread) of its lock hashes, whose field is the owner.
func (b *Bridge) hexists(r *request) {
	if len(r.args) != 3 {
		wrongArity(r)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	s, held, err := b.locker.Status(ctx, string(r.args[1]))
	b.writeBool(ctx, r, held && s.Owner == string(r.args[2]), err)
}

// hget: HGET key field → field's hold count of the lock key, or null if it
// does not hold it (Redisson's getHoldCount).
func (b *Bridge) hget(r *request) {
	if len(r.args) != 3 {
		wrongArity(r)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	key, owner := string(r.args[1]), string(r.args[2])
	count := 0
	err := b.locker.Update(ctx, nil, func(tx *server.Tx) error {
		count = 0
		s, held, err := tx.Status(key)
		if err != nil || !held || s.Owner != owner {
			return err
		}
		count, err = holdCount(tx, key, owner)
		return err
	})
	switch {
	case err != nil:
		b.fail(ctx, r, err)
	case count == 0:
		r.null()
	default:
		r.c.WriteBulkString(strconv.Itoa(count))
	}
}
