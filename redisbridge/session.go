package redisbridge

import (
	"context"
	"strconv"
	"strings"

	"github.com/fencerlock/fencer/server"
	"github.com/fencerlock/fencer/wire"
)

// parseSession parses a session ID: a positive decimal integer.
func parseSession(b []byte) (uint64, bool) {
	id, err := strconv.ParseUint(string(b), 10, 64)
	return id, err == nil && id > 0
}

// session: FENCE.SESSION OPEN ttl-ms → id
//
//	FENCE.SESSION KEEPALIVE id → 0 not open, else 1 + the number of locks
//	  taken from the session by others since it opened
//	FENCE.SESSION CLOSE id → 1 closed (its locks released), 0 not open
//	FENCE.SESSION REVOKE id → 1 ended, 0 not open (a user with pattern "*")
//	FENCE.SESSION INFO id → null if not open, else
//	  [ttl-ms, remaining-ms, [[key, owner, token], ...]]
func (b *Bridge) session(r *request) {
	if len(r.args) != 3 {
		wrongArity(r)
		return
	}
	sub := strings.ToUpper(string(r.args[1]))
	if sub == "OPEN" {
		ttl, ok := parseMillis(r.args[2])
		if !ok {
			writeError(r.c, errNotInteger)
			return
		}
		ctx, cancel := b.requestCtx(0)
		defer cancel()
		id, err := b.locker.OpenSession(ctx, ttl)
		if err != nil {
			b.fail(ctx, r, err)
			return
		}
		r.c.WriteUint64(id)
		return
	}
	id, ok := parseSession(r.args[2])
	var call func(context.Context, uint64) (bool, error)
	keepalive := false
	switch sub {
	case "KEEPALIVE":
		keepalive = true
	case "CLOSE":
		call = b.locker.CloseSession
	case "REVOKE":
		call = b.locker.RevokeSession
	case "INFO":
	default:
		writeError(r.c, errf("unknown subcommand '%s'. Try OPEN, KEEPALIVE, CLOSE, REVOKE, INFO.", r.args[1]))
		return
	}
	if !ok {
		writeError(r.c, wire.FormatInvalidArgument("session", "not a session ID (a positive integer)"))
		return
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	if keepalive {
		taken, alive, err := b.locker.KeepAlive(ctx, id)
		switch {
		case err != nil:
			b.fail(ctx, r, err)
		case !alive:
			r.c.WriteInt(0)
		default:
			r.c.WriteUint64(1 + taken)
		}
		return
	}
	if call != nil {
		yes, err := call(ctx, id)
		b.writeBool(ctx, r, yes, err)
		return
	}
	s, open, err := b.locker.Session(ctx, id)
	switch {
	case err != nil:
		b.fail(ctx, r, err)
	case !open:
		r.null()
	default:
		r.c.WriteArray(3)
		r.c.WriteInt64(s.TTL.Milliseconds())
		r.c.WriteInt64(max(s.Remaining.Milliseconds(), 1))
		r.c.WriteArray(len(s.Locks))
		for _, l := range s.Locks {
			r.c.WriteArray(3)
			r.c.WriteBulkString(l.Key)
			r.c.WriteBulkString(l.Owner)
			r.c.WriteUint64(l.Token)
		}
	}
}

// proclaim: FENCE.PROCLAIM key owner session value → 1 if owner holds key
// under session (its value is now value, its token unchanged), else 0.
func (b *Bridge) proclaim(r *request) {
	if len(r.args) != 5 {
		wrongArity(r)
		return
	}
	id, ok := parseSession(r.args[3])
	if !ok {
		writeError(r.c, wire.FormatInvalidArgument("session", "not a session ID (a positive integer)"))
		return
	}
	b.boolCall(r, 5, func(ctx context.Context) (bool, error) {
		return b.locker.Proclaim(ctx, id, string(r.args[1]), string(r.args[2]), string(r.args[4]))
	})
}

// holder: FENCE.HOLDER key → null if free, else [owner, token,
// remaining-ms, session, value]: FENCE.STATUS with the session the lock is
// held under (0: none) and its value (an election's leader's value).
func (b *Bridge) holder(r *request) {
	if len(r.args) != 2 {
		wrongArity(r)
		return
	}
	b.withStatus(r, r.null, func(s server.Status) {
		r.c.WriteArray(5)
		r.c.WriteBulkString(s.Owner)
		r.c.WriteUint64(s.Token)
		r.c.WriteInt64(max(s.Remaining.Milliseconds(), 1))
		r.c.WriteUint64(s.Session)
		r.c.WriteBulkString(s.Value)
	})
}
