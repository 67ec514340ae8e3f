package redisbridge

import (
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/redcon"
)

// maxMillis bounds millisecond arguments before they become a Duration.
const maxMillis = int64(1<<63-1) / int64(time.Millisecond)

// parseMillis parses a non-negative millisecond count.
func parseMillis(b []byte) (time.Duration, bool) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || v < 0 || v > maxMillis {
		return 0, false
	}
	return time.Duration(v) * time.Millisecond, true
}

func (b *Bridge) ping(c redcon.Conn, args [][]byte) {
	switch len(args) {
	case 1:
		c.WriteString("PONG")
	case 2:
		c.WriteBulk(args[1])
	default:
		wrongArity(c, args)
	}
}

func (b *Bridge) quit(c redcon.Conn, _ [][]byte) {
	c.WriteString("OK")
	_ = c.Close()
}

// acquire: FENCE.ACQUIRE key owner ttl-ms [WAIT ms]
// → [token, granted-ttl-ms], or null when another owner holds the lock.
func (b *Bridge) acquire(c redcon.Conn, args [][]byte) {
	if len(args) != 4 && len(args) != 6 {
		wrongArity(c, args)
		return
	}
	ttl, ok := parseMillis(args[3])
	if !ok {
		c.WriteError("ERR value is not an integer or out of range")
		return
	}
	var wait time.Duration
	if len(args) == 6 {
		if !strings.EqualFold(string(args[4]), "WAIT") {
			c.WriteError("ERR syntax error")
			return
		}
		if wait, ok = parseMillis(args[5]); !ok {
			c.WriteError("ERR value is not an integer or out of range")
			return
		}
	}
	ctx, cancel := b.requestCtx(wait)
	defer cancel()
	if wait > 0 {
		// A client that hangs up while it waits leaves the queue.
		stop := watchHangup(ctx, c.NetConn(), cancel)
		defer stop()
	}
	g, granted, err := b.locker.Acquire(ctx, string(args[1]), string(args[2]), ttl, wait)
	if err != nil {
		writeErr(c, err)
		return
	}
	if !granted {
		c.WriteNull()
		return
	}
	c.WriteArray(2)
	c.WriteUint64(g.Token)
	c.WriteInt64(g.TTL.Milliseconds())
}

// extend: FENCE.EXTEND key owner ttl-ms → 1 extended, 0 not the holder.
func (b *Bridge) extend(c redcon.Conn, args [][]byte) {
	if len(args) != 4 {
		wrongArity(c, args)
		return
	}
	ttl, ok := parseMillis(args[3])
	if !ok {
		c.WriteError("ERR value is not an integer or out of range")
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	writeBool(c, func() (bool, error) { return b.locker.Extend(ctx, string(args[1]), string(args[2]), ttl) })
}

// release: FENCE.RELEASE key owner → 1 released (or already released by this
// owner), 0 otherwise.
func (b *Bridge) release(c redcon.Conn, args [][]byte) {
	if len(args) != 3 {
		wrongArity(c, args)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	writeBool(c, func() (bool, error) { return b.locker.Release(ctx, string(args[1]), string(args[2])) })
}

// revoke: FENCE.REVOKE key → 1 if a holder's grant was ended, 0 if free.
// An administrative force-release.
func (b *Bridge) revoke(c redcon.Conn, args [][]byte) {
	if len(args) != 2 {
		wrongArity(c, args)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	writeBool(c, func() (bool, error) { return b.locker.Revoke(ctx, string(args[1])) })
}

// status: FENCE.STATUS key → null if free, else [owner, token, remaining-ms].
func (b *Bridge) status(c redcon.Conn, args [][]byte) {
	if len(args) != 2 {
		wrongArity(c, args)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	s, held, err := b.locker.Status(ctx, string(args[1]))
	switch {
	case err != nil:
		writeErr(c, err)
	case !held:
		c.WriteNull()
	default:
		c.WriteArray(3)
		c.WriteBulkString(s.Owner)
		c.WriteUint64(s.Token)
		c.WriteInt64(max(s.Remaining.Milliseconds(), 1))
	}
}

// token: FENCE.TOKEN key → the current grant's token, or null if free.
func (b *Bridge) token(c redcon.Conn, args [][]byte) {
	if len(args) != 2 {
		wrongArity(c, args)
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	s, held, err := b.locker.Status(ctx, string(args[1]))
	switch {
	case err != nil:
		writeErr(c, err)
	case !held:
		c.WriteNull()
	default:
		c.WriteUint64(s.Token)
	}
}

// check: FENCE.CHECK key token → 1 if token is the current grant, else 0.
func (b *Bridge) check(c redcon.Conn, args [][]byte) {
	if len(args) != 3 {
		wrongArity(c, args)
		return
	}
	tok, err := strconv.ParseUint(string(args[2]), 10, 64)
	if err != nil {
		c.WriteError("ERR value is not an integer or out of range")
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	writeBool(c, func() (bool, error) { return b.locker.Check(ctx, string(args[1]), tok) })
}

// leader: FENCE.LEADER → [id, client-addr] of the leader, null if none known.
func (b *Bridge) leader(c redcon.Conn, args [][]byte) {
	if len(args) != 1 {
		wrongArity(c, args)
		return
	}
	id, addr := b.locker.Leader()
	if id == "" {
		c.WriteNull()
		return
	}
	c.WriteArray(2)
	c.WriteBulkString(id)
	c.WriteBulkString(addr)
}

func writeBool(c redcon.Conn, f func() (bool, error)) {
	ok, err := f()
	switch {
	case err != nil:
		writeErr(c, err)
	case ok:
		c.WriteInt(1)
	default:
		c.WriteInt(0)
	}
}
