package redisbridge

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/server"
	"github.com/fencerlock/fencer/wire"
)

// sharedNode is what read-write locks, semaphores and several keys at once
// need of the node (see server.Node.AcquireShared and AcquireMany).
type sharedNode interface {
	AcquireShared(ctx context.Context, a server.SharedAcquire) (server.Grant, bool, error)
	Holders(ctx context.Context, key string) ([]server.Holding, error)
	AcquireMany(ctx context.Context, a server.MultiAcquire) (server.Grant, bool, error)
	ExtendMany(ctx context.Context, keys []string, owner string, ttl time.Duration) (int, error)
	ReleaseMany(ctx context.Context, keys []string, owner string, session uint64) (int, error)
}

// rwlock: FENCE.RLOCK / FENCE.WLOCK key owner ttl-ms [WAIT ms] [SESSION id]
// → [token, ttl-ms], or null: a reader or the writer of a read-write lock.
func (b *Bridge) rwlock(r *request) {
	mode := fsm.ModeRead
	if strings.EqualFold(string(r.args[0]), "fence.wlock") {
		mode = fsm.ModeWrite
	}
	b.sharedAcquire(r, mode, 4)
}

// semacquire: FENCE.SEMACQUIRE key owner ttl-ms permits [WAIT ms]
// [SESSION id] → [slot, token, ttl-ms], or null: a permit of a semaphore.
func (b *Bridge) semacquire(r *request) {
	b.sharedAcquire(r, fsm.ModePermit, 5)
}

// sharedAcquire runs a shared acquire of mode whose options start at
// argument lead.
func (b *Bridge) sharedAcquire(r *request, mode fsm.Mode, lead int) {
	args := r.args
	ttl, ok := parseMillis(args[3])
	if !ok {
		writeError(r.c, errMillis("ttl", args[3]))
		return
	}
	permits := 0
	if mode == fsm.ModePermit {
		n, err := strconv.Atoi(string(args[4]))
		if err != nil || n < 0 {
			writeError(r.c, errArg("permits", "the semaphore's number of permits (a whole number)", args[4]))
			return
		}
		permits = n
	}
	o, ok := parseAcquireOptions(r, args[lead:], false, ttl)
	if !ok {
		return
	}
	a := server.SharedAcquire{Key: string(args[1]), Owner: string(args[2]), Mode: mode, Permits: permits, TTL: ttl, Session: o.session}
	b.runAcquire(r, args[:lead], o, mode == fsm.ModePermit, func(ctx context.Context, wait time.Duration) (server.Grant, bool, error) {
		a.Wait = wait
		return b.locker.AcquireShared(ctx, a)
	})
}

// holders: FENCE.HOLDERS key → an array of [owner, token, remaining-ms,
// session, mode, slot], one for each holder (empty if the key is free).
func (b *Bridge) holders(r *request) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	hs, err := b.locker.Holders(ctx, string(r.args[1]))
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.c.WriteArray(len(hs))
	for _, h := range hs {
		r.c.WriteArray(6)
		r.c.WriteBulkString(h.Owner)
		r.c.WriteUint64(h.Token)
		r.c.WriteInt64(max(h.Remaining.Milliseconds(), 1))
		r.c.WriteUint64(h.Session)
		r.c.WriteBulkString(h.Mode.String())
		r.c.WriteInt64(int64(h.Slot))
	}
}

// multiKeys parses numkeys key [key ...] at args[at:], answering r and
// reporting false if they are wrong; it returns the keys and the
// arguments after them.
func multiKeys(r *request, args [][]byte, at int) (keys []string, rest [][]byte, ok bool) {
	n, err := strconv.Atoi(string(args[at]))
	switch {
	case err != nil || n < 0:
		writeError(r.c, errArg("numkeys", "how many keys follow (a whole number)", args[at]))
		return nil, nil, false
	case n == 0 || n > server.MaxMultiKeys:
		writeError(r.c, wire.FormatInvalidArgument("numkeys", fmt.Sprintf("%d is outside 1..%d", n, server.MaxMultiKeys)))
		return nil, nil, false
	case len(args) < at+1+n:
		wrongArity(r)
		return nil, nil, false
	}
	for _, k := range args[at+1 : at+1+n] {
		keys = append(keys, string(k))
	}
	return keys, args[at+1+n:], true
}

// ttlAndKeys parses the head FENCE.MACQUIRE and FENCE.MEXTEND share,
// owner ttl-ms numkeys key [key ...], answering r and reporting false if it
// is wrong; it returns the TTL, the keys and the arguments after them.
func ttlAndKeys(r *request) (ttl time.Duration, keys []string, rest [][]byte, ok bool) {
	if ttl, ok = parseMillis(r.args[2]); !ok {
		writeError(r.c, errMillis("ttl", r.args[2]))
		return 0, nil, nil, false
	}
	keys, rest, ok = multiKeys(r, r.args, 3)
	return ttl, keys, rest, ok
}

// macquire: FENCE.MACQUIRE owner ttl-ms numkeys key [key ...] [WAIT ms]
// [SESSION id] → [token, ttl-ms] or null: every key, or none, in one entry.
func (b *Bridge) macquire(r *request) {
	args := r.args
	ttl, keys, rest, ok := ttlAndKeys(r)
	if !ok {
		return
	}
	o, ok := parseAcquireOptions(r, rest, false, ttl)
	if !ok {
		return
	}
	if o.session != 0 {
		// A transaction's commands carry no session part (fsm.Txn).
		writeError(r.c, wire.FormatInvalidArgument("session", "several keys at once cannot be taken under a session"))
		return
	}
	a := server.MultiAcquire{Keys: keys, Owner: string(args[1]), TTL: ttl}
	b.runAcquire(r, args[:len(args)-len(rest)], o, false, func(ctx context.Context, wait time.Duration) (server.Grant, bool, error) {
		a.Wait = wait
		return b.locker.AcquireMany(ctx, a)
	})
}

// mextend: FENCE.MEXTEND owner ttl-ms numkeys key [key ...] → how many of
// the keys were renewed, in one entry.
func (b *Bridge) mextend(r *request) {
	args := r.args
	ttl, keys, rest, ok := ttlAndKeys(r)
	if !ok {
		return
	}
	if len(rest) != 0 {
		writeError(r.c, errOption(rest[0], "no options after the keys"))
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	n, err := b.locker.ExtendMany(ctx, keys, string(args[1]), ttl)
	b.writeCount(ctx, r, n, err)
}

// mrelease: FENCE.MRELEASE owner numkeys key [key ...] [SESSION id] → how
// many of the keys were released, in one entry.
func (b *Bridge) mrelease(r *request) {
	args := r.args
	keys, rest, ok := multiKeys(r, args, 2)
	if !ok {
		return
	}
	var session uint64
	switch {
	case len(rest) == 0:
	case len(rest) == 2 && strings.EqualFold(string(rest[0]), "SESSION"):
		if session, ok = parseSession(rest[1]); !ok {
			writeError(r.c, errSessionID(rest[1]))
			return
		}
	default:
		writeError(r.c, errOption(rest[0], "SESSION id"))
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	if session != 0 && !b.sessionPermitted(ctx, r, session) {
		return
	}
	n, err := b.locker.ReleaseMany(ctx, keys, string(args[1]), session)
	b.writeCount(ctx, r, n, err)
}

func (b *Bridge) writeCount(ctx context.Context, r *request, n int, err error) {
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.c.WriteInt(n)
}
