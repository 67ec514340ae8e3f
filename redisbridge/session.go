package redisbridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/server"
	"github.com/fencerlock/fencer/wire"
)

// sessionNode is what sessions need of the node (see
// server.Node.OpenSession).
type sessionNode interface {
	OpenSession(ctx context.Context, ttl time.Duration, user string) (uint64, error)
	SessionUser(ctx context.Context, id uint64) (user string, open bool, err error)
	KeepAlive(ctx context.Context, id uint64) (taken uint64, alive bool, err error)
	CloseSession(ctx context.Context, id uint64) (bool, error)
	RevokeSession(ctx context.Context, id uint64) (bool, error)
	Session(ctx context.Context, id uint64) (server.SessionStatus, bool, error)
	AcquireInSession(ctx context.Context, session uint64, key, owner, value string, wait time.Duration) (server.Grant, bool, error)
	ReleaseInSession(ctx context.Context, session uint64, key, owner string) (bool, error)
	Proclaim(ctx context.Context, session uint64, key, owner, value string) (bool, error)
}

// userName is the name of the connection's user; empty without
// authentication.
func (st *connState) userName() string {
	if st.user == nil {
		return ""
	}
	return st.user.Name
}

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
	sub := strings.ToUpper(string(r.args[1]))
	if sub == "OPEN" {
		ttl, ok := parseMillis(r.args[2])
		if !ok {
			writeError(r.c, errMillis("ttl", r.args[2]))
			return
		}
		ctx, cancel := b.requestCtx(0)
		defer cancel()
		id, err := b.locker.OpenSession(ctx, ttl, r.conn.userName())
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
	if !b.sessionPermitted(ctx, r, id) {
		return
	}
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
	id, ok := parseSession(r.args[3])
	if !ok {
		writeError(r.c, wire.FormatInvalidArgument("session", "not a session ID (a positive integer)"))
		return
	}
	b.boolCall(r, func(ctx context.Context) (bool, error) {
		if !b.sessionPermitted(ctx, r, id) {
			return false, errAnswered
		}
		return b.locker.Proclaim(ctx, id, string(r.args[1]), string(r.args[2]), string(r.args[4]))
	})
}

// errAnswered is returned by a call that has already answered the request
// (a refusal written by sessionPermitted).
var errAnswered = errors.New("redisbridge: answered")

// sessionPermitted reports whether the connection's user may use session
// id: any user without authentication, or with pattern "*"; otherwise only
// the user that opened it (a session holds locks of its opener's, and its
// ID, a log position, is easy to guess). A session that is not open is
// permitted: the command then finds it gone. If not permitted, or the
// check failed, it has answered the request.
func (b *Bridge) sessionPermitted(ctx context.Context, r *request, id uint64) bool {
	if !b.authRequired() || r.conn.user == nil || r.conn.user.Pattern == "*" {
		return true
	}
	user, open, err := b.locker.SessionUser(ctx, id)
	switch {
	case err != nil:
		writeErr(r.c, err)
		return false
	case open && user != r.conn.user.Name:
		writeError(r.c, wire.Error{Code: wire.NoPerm, Text: fmt.Sprintf("User %s may not use session %d, which another user opened", r.conn.user.Name, id)})
		return false
	}
	return true
}

// holder: FENCE.HOLDER key → null if free, else [owner, token,
// remaining-ms, session, value]: FENCE.STATUS with the session the lock is
// held under (0: none) and its value (an election's leader's value).
func (b *Bridge) holder(r *request) {
	b.withStatus(r, r.null, func(s server.Status) {
		r.c.WriteArray(5)
		r.c.WriteBulkString(s.Owner)
		r.c.WriteUint64(s.Token)
		r.c.WriteInt64(max(s.Remaining.Milliseconds(), 1))
		r.c.WriteUint64(s.Session)
		r.c.WriteBulkString(s.Value)
	})
}
