package redisbridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
	"github.com/fencerlock/fencer/wire"
)

// lockNode is what the lock commands need of the node.
type lockNode interface {
	Acquire(ctx context.Context, key, owner string, ttl, wait time.Duration) (server.Grant, bool, error)
	Extend(ctx context.Context, key, owner string, ttl time.Duration) (bool, error)
	Release(ctx context.Context, key, owner string) (bool, error)
	Revoke(ctx context.Context, key string) (bool, error)
	Status(ctx context.Context, key string) (server.Status, bool, error)
}

// maxMillis bounds millisecond arguments before they become a Duration.
const maxMillis = int64(1<<63-1) / int64(time.Millisecond)

// resendPause is how long a waiting acquire pauses before it is sent again
// after a leader change.
const resendPause = 100 * time.Millisecond

// parseMillis parses a non-negative millisecond count.
func parseMillis(b []byte) (time.Duration, bool) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || v < 0 || v > maxMillis {
		return 0, false
	}
	return time.Duration(v) * time.Millisecond, true
}

func (b *Bridge) ping(r *request) {
	if r.conn.proto == 2 && r.conn.sub != nil && r.conn.sub.count() > 0 {
		// In RESP2 subscribe mode Redis answers PING as a message.
		r.c.WriteArray(2)
		r.c.WriteBulkString("pong")
		if len(r.args) == 2 {
			r.c.WriteBulk(r.args[1])
		} else {
			r.c.WriteBulkString("")
		}
		return
	}
	if len(r.args) == 1 {
		r.c.WriteString("PONG")
	} else {
		r.c.WriteBulk(r.args[1])
	}
}

func (b *Bridge) quit(r *request) {
	r.c.WriteString("OK")
	_ = r.c.Close()
}

// acquire: FENCE.ACQUIRE key owner ttl-ms [WAIT ms] [SESSION id [VALUE v]]
// → [token, granted-ttl-ms], or null when another owner holds the lock.
// Under a session ttl-ms must be 0, and the reply's TTL is 0: the lock
// lives as long as the session. A wait survives leader changes (runAcquire).
func (b *Bridge) acquire(r *request) {
	args := r.args
	ttl, ok := parseMillis(args[3])
	if !ok {
		writeError(r.c, errMillis("ttl", args[3]))
		return
	}
	o, ok := parseAcquireOptions(r, args[4:], true, ttl)
	if !ok {
		return
	}
	key, owner := string(args[1]), string(args[2])
	b.runAcquire(r, args[:4], o, false, func(ctx context.Context, wait time.Duration) (server.Grant, bool, error) {
		if o.session != 0 {
			return b.locker.AcquireInSession(ctx, o.session, key, owner, string(o.value), wait)
		}
		return b.locker.Acquire(ctx, key, owner, ttl, wait)
	})
}

// acquireOptions are an acquire's options: [WAIT ms] [SESSION id [VALUE v]].
type acquireOptions struct {
	wait    time.Duration
	session uint64
	value   []byte
	// sessionArgs are SESSION id [VALUE v] as sent again on a resend.
	sessionArgs [][]byte
}

// parseAcquireOptions parses opts, answering r and reporting false if they
// are wrong; VALUE only if withValue. ttl is the acquire's (0 under a
// session).
func parseAcquireOptions(r *request, opts [][]byte, withValue bool, ttl time.Duration) (acquireOptions, bool) {
	var o acquireOptions
	hasWait, hasValue, ok := false, false, false
	for i := 0; i < len(opts); i += 2 {
		if i+1 >= len(opts) {
			wrongArity(r) // an option without its value
			return o, false
		}
		opt := string(opts[i])
		switch {
		case strings.EqualFold(opt, "WAIT") && !hasWait:
			if o.wait, ok = parseMillis(opts[i+1]); !ok {
				writeError(r.c, errMillis("wait", opts[i+1]))
				return o, false
			}
			hasWait = true
		case strings.EqualFold(opt, "SESSION") && o.session == 0:
			if o.session, ok = parseSession(opts[i+1]); !ok {
				writeError(r.c, errSessionID(opts[i+1]))
				return o, false
			}
			o.sessionArgs = append(o.sessionArgs, opts[i], opts[i+1])
		case strings.EqualFold(opt, "VALUE") && !hasValue && withValue:
			o.value, hasValue = opts[i+1], true
			o.sessionArgs = append(o.sessionArgs, opts[i], opts[i+1])
		default:
			want := "WAIT ms or SESSION id, each once"
			if withValue {
				want = "WAIT ms, SESSION id or VALUE v, each once"
			}
			writeError(r.c, errOption(opts[i], want))
			return o, false
		}
	}
	switch {
	case hasValue && o.session == 0:
		writeError(r.c, wire.FormatInvalidArgument("value", "only under a session (SESSION id)"))
		return o, false
	case o.session != 0 && ttl != 0:
		writeError(r.c, wire.FormatInvalidArgument("ttl", "must be 0 under a session: the lock lives as long as the session"))
		return o, false
	}
	return o, true
}

// runAcquire runs an acquire whose arguments before the options are lead
// and whose options are o, by call, and writes its grant ([slot, token,
// ttl] if slot, else [token, ttl]).
//
// A waiting acquire survives leader changes: if the leader holding the wait
// is deposed (UNCERTAIN), or cannot be reached, the acquire is sent again,
// to the new leader, with what is left of the wait. That is safe because an
// acquire by the same owner is idempotent: a grant that did happen is
// returned again with the same token.
func (b *Bridge) runAcquire(r *request, lead [][]byte, o acquireOptions, slot bool, call func(ctx context.Context, wait time.Duration) (server.Grant, bool, error)) {
	wait := o.wait
	write := b.writeGrant
	if slot {
		write = b.writeSlotGrant
	}
	ctx, cancel := b.requestCtx(wait)
	defer cancel()
	if c, ok := r.client(); ok {
		ctx = server.WithClient(ctx, c)
	}
	if o.session != 0 && !b.sessionPermitted(ctx, r, o.session) {
		return
	}
	if wait == 0 {
		g, granted, err := call(ctx, 0)
		write(ctx, r, g, granted, err)
		return
	}
	// A client that hangs up while it waits leaves the queue.
	stop := b.hangups.watch(r.c.NetConn(), cancel)
	defer stop()
	end := time.Now().Add(wait)
	// uncertain is set once an attempt may have been granted unseen; the
	// request then never ends in a plain null, only in a grant, a definite
	// answer from a later attempt, or UNCERTAIN.
	uncertain := false
	var last error
	for attempt := 0; ; attempt++ {
		left := wait
		if attempt > 0 {
			left = time.Until(end).Truncate(time.Millisecond)
		}
		if left <= 0 || ctx.Err() != nil {
			b.endWait(r, uncertain, last)
			return
		}
		g, granted, err := call(ctx, left)
		var nl *server.NotLeaderError
		switch {
		case err == nil:
			write(ctx, r, g, granted, nil)
			return
		case r.conn.forwarded:
			// The node that forwarded this wait re-sends it itself, to
			// whichever node leads now.
			writeErr(r.c, err)
			return
		case errors.As(err, &nl) && nl.LeaderAddr != "":
			resend := append(append([][]byte(nil), lead...), []byte("WAIT"), strconv.AppendInt(nil, left.Milliseconds(), 10))
			resend = append(resend, o.sessionArgs...)
			raw := resp.AppendCommand(nil, resend...)
			reply, sent, ferr := b.forward(ctx, nl.LeaderAddr, r, raw, resend)
			code := replyCode(reply)
			switch {
			case ferr != nil:
				uncertain = uncertain || sent
				last = server.ErrNoLeader
			case resendable(code):
				uncertain = uncertain || code == wire.Uncertain || code == wire.Shutdown
				last = server.ErrNoLeader
			default:
				r.c.WriteRaw(reply)
				return
			}
		case errors.Is(err, server.ErrUnknownOutcome):
			uncertain, last = true, err
		case errors.Is(err, server.ErrNoLeader), errors.Is(err, server.ErrNotLeader):
			last = err
		case ctx.Err() != nil:
			// This attempt's command was withdrawn unsent or never made;
			// an earlier attempt's outcome may still be open.
			b.endWait(r, uncertain, err)
			return
		default:
			writeErr(r.c, err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(resendPause):
		}
	}
}

// endWait answers a waiting acquire whose time ran out between attempts.
func (b *Bridge) endWait(r *request, uncertain bool, last error) {
	switch {
	case uncertain:
		writeErr(r.c, fmt.Errorf("%w: the wait ended after a leader change left an earlier attempt's outcome unknown", server.ErrUnknownOutcome))
	case last != nil:
		writeErr(r.c, last)
	default:
		r.null()
	}
}

// resendable reports whether a leader's reply to a waiting acquire means
// "ask the new leader": it lost leadership, or had none.
func resendable(code wire.Code) bool {
	switch code {
	case wire.Uncertain, wire.NotLeader, wire.NoLeader, wire.Shutdown:
		return true
	}
	return false
}

func (b *Bridge) writeGrant(ctx context.Context, r *request, g server.Grant, granted bool, err error) {
	switch {
	case err != nil:
		b.fail(ctx, r, err)
	case !granted:
		r.null()
	default:
		r.c.WriteArray(2)
		r.c.WriteUint64(g.Token)
		r.c.WriteInt64(g.TTL.Milliseconds())
	}
}

// writeSlotGrant writes a permit's grant: [slot, token, ttl-ms].
func (b *Bridge) writeSlotGrant(ctx context.Context, r *request, g server.Grant, granted bool, err error) {
	switch {
	case err != nil:
		b.fail(ctx, r, err)
	case !granted:
		r.null()
	default:
		r.c.WriteArray(3)
		r.c.WriteInt64(int64(g.Slot))
		r.c.WriteUint64(g.Token)
		r.c.WriteInt64(g.TTL.Milliseconds())
	}
}

// extend: FENCE.EXTEND key owner ttl-ms → 1 extended, 0 not the holder.
func (b *Bridge) extend(r *request) {
	ttl, ok := parseMillis(r.args[3])
	if !ok {
		writeError(r.c, errMillis("ttl", r.args[3]))
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	ok, err := b.locker.Extend(ctx, string(r.args[1]), string(r.args[2]), ttl)
	b.writeBool(ctx, r, ok, err)
}

// release: FENCE.RELEASE key owner [SESSION id] → 1 released (or already
// released by this owner), 0 otherwise.
func (b *Bridge) release(r *request) {
	switch len(r.args) {
	case 4: // SESSION without its id
		wrongArity(r)
		return
	case 5:
		session, ok := parseSession(r.args[4])
		switch {
		case !strings.EqualFold(string(r.args[3]), "SESSION"):
			writeError(r.c, errOption(r.args[3], "SESSION id"))
		case !ok:
			writeError(r.c, errSessionID(r.args[4]))
		default:
			b.boolCall(r, func(ctx context.Context) (bool, error) {
				if !b.sessionPermitted(ctx, r, session) {
					return false, errAnswered
				}
				return b.locker.ReleaseInSession(ctx, session, string(r.args[1]), string(r.args[2]))
			})
		}
		return
	}
	b.boolCall(r, func(ctx context.Context) (bool, error) {
		return b.locker.Release(ctx, string(r.args[1]), string(r.args[2]))
	})
}

// revoke: FENCE.REVOKE key → 1 if a holder's grant was ended, 0 if free.
// An administrative force-release.
func (b *Bridge) revoke(r *request) {
	b.boolCall(r, func(ctx context.Context) (bool, error) {
		return b.locker.Revoke(ctx, string(r.args[1]))
	})
}

// boolCall answers a command whose call on the node reports yes or no: 1
// or 0.
func (b *Bridge) boolCall(r *request, call func(context.Context) (bool, error)) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	ok, err := call(ctx)
	b.writeBool(ctx, r, ok, err)
}

// status: FENCE.STATUS key → null if free, else [owner, token, remaining-ms].
func (b *Bridge) status(r *request) {
	b.withStatus(r, r.null, func(s server.Status) {
		r.c.WriteArray(3)
		r.c.WriteBulkString(s.Owner)
		r.c.WriteUint64(s.Token)
		r.c.WriteInt64(max(s.Remaining.Milliseconds(), 1))
	})
}

// token: FENCE.TOKEN key [value|field] → the current grant's token, or null
// if the key is free. With value: the token of that value's grant, or null
// if that value does not hold the key; a Redlock client that took the lock
// with SET NX or a script fetches its token this way. A hash (Redisson's
// lock) has the token it got when it was created: with field, only if the
// hash has that field (the lock's holder).
func (b *Bridge) token(r *request) {
	var member []byte
	if len(r.args) == 3 {
		member = r.args[2]
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	tok, ok, err := b.engine.Token(ctx, string(r.args[1]), member)
	switch {
	case err != nil:
		b.fail(ctx, r, err)
	case !ok:
		r.null()
	default:
		r.c.WriteUint64(tok)
	}
}

// withStatus reads the status of the key in r.args[1] and answers through
// free or held; an error is answered (or forwarded) by fail.
func (b *Bridge) withStatus(r *request, free func(), held func(server.Status)) {
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	s, ok, err := b.locker.Status(ctx, string(r.args[1]))
	switch {
	case err != nil:
		b.fail(ctx, r, err)
	case !ok:
		free()
	default:
		held(s)
	}
}

// check: FENCE.CHECK key token → 1 if token is the key's current token (a
// lock's grant, or a hash's), else 0.
func (b *Bridge) check(r *request) {
	tok, err := strconv.ParseUint(string(r.args[2]), 10, 64)
	if err != nil {
		writeError(r.c, errArg("token", "a fencing token (a whole number)", r.args[2]))
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	cur, ok, err := b.engine.Token(ctx, string(r.args[1]), nil)
	b.writeBool(ctx, r, ok && cur == tok, err)
}

func (b *Bridge) writeBool(ctx context.Context, r *request, ok bool, err error) {
	switch {
	case errors.Is(err, errAnswered):
	case err != nil:
		b.fail(ctx, r, err)
	case ok:
		r.c.WriteInt(1)
	default:
		r.c.WriteInt(0)
	}
}
