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
	"github.com/tidwall/match"
)

// Listings for operators, answered by the leader (a follower forwards them,
// on behalf of its client's user: see onbehalf.go).

// listNode is what the listings need of the node.
type listNode interface {
	Locks(ctx context.Context, q server.LockQuery) (server.LockPage, error)
	Sessions(ctx context.Context, after uint64, count int, user string) (server.SessionPage, error)
}

// defaultListCount is a page's size when COUNT is not given.
const defaultListCount = 100

// locks: FENCE.LOCKS [PREFIX p] [AFTER name] [COUNT n] [MATCH pattern]
// [ELECTIONS] → a map: leader (the node that answered: the waiters are its
// queue), position, next ("" after the last page) and locks, one map per
// key (see docs/protocol.md). A user sees only the names its pattern
// allows; MATCH narrows further.
func (b *Bridge) locks(r *request) {
	q := server.LockQuery{Count: defaultListCount}
	var patterns []string
	for i := 1; i < len(r.args); i++ {
		opt := strings.ToUpper(string(r.args[i]))
		if opt == "ELECTIONS" {
			q.Elections = true
			continue
		}
		if i+1 >= len(r.args) {
			writeError(r.c, errOption(r.args[i], "PREFIX p, AFTER name, COUNT n, MATCH pattern or ELECTIONS"))
			return
		}
		v := string(r.args[i+1])
		i++
		switch opt {
		case "PREFIX":
			q.Prefix = v
		case "AFTER":
			q.After = v
		case "MATCH":
			patterns = append(patterns, v)
		case "COUNT":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > server.MaxListCount {
				writeError(r.c, errArg("count", fmt.Sprintf("a whole number from 1 to %d", server.MaxListCount), r.args[i]))
				return
			}
			q.Count = n
		default:
			writeError(r.c, errOption(r.args[i-1], "PREFIX p, AFTER name, COUNT n, MATCH pattern or ELECTIONS"))
			return
		}
	}
	if u := r.conn.user; u != nil && u.Pattern != "*" {
		patterns = append(patterns, u.Pattern)
	}
	q.Visible = func(name string) bool {
		for _, p := range patterns {
			if !match.Match(name, p) {
				return false
			}
		}
		return true
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	p, err := b.locker.Locks(ctx, q)
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.mapHeader(4)
	r.writeFields2("leader", b.locker.ID(), "next", p.Next)
	r.c.WriteBulkString("position")
	r.c.WriteInt64(int64(p.Position))
	r.c.WriteBulkString("locks")
	r.c.WriteArray(len(p.Locks))
	for _, l := range p.Locks {
		r.mapHeader(6)
		r.writeFields2("name", l.Name, "kind", l.Kind, "value", l.Value)
		r.c.WriteBulkString("permits")
		r.c.WriteInt64(int64(l.Permits))
		r.c.WriteBulkString("holders")
		r.c.WriteArray(len(l.Holders))
		for _, h := range l.Holders {
			r.mapHeader(7)
			r.writeFields2("owner", h.Owner, "mode", modeName(h.Mode))
			r.writeInts("token", int64(h.Token), "remaining_ms", remainingMS(h.Remaining), "session", int64(h.Session), "slot", int64(h.Slot))
			// The client that took it, as the leader recorded it; null
			// where it has no record (granted under an earlier leader).
			r.c.WriteBulkString("client")
			if c := h.Client; c != nil {
				r.mapHeader(3)
				r.writeFields2("user", c.User, "addr", c.Addr, "name", c.Name)
			} else {
				r.null()
			}
		}
		r.c.WriteBulkString("waiters")
		r.c.WriteArray(len(l.Waiters))
		for _, w := range l.Waiters {
			r.mapHeader(6)
			r.writeFields2("owner", w.Owner, "mode", modeName(w.Mode))
			r.writeInts("permits", int64(w.Permits), "session", int64(w.Session), "keys", int64(w.Keys), "waited_ms", w.Waited.Milliseconds())
		}
	}
}

// sessions: FENCE.SESSIONS [AFTER id] [COUNT n] [USER name] → a map:
// position, next (0 after the last page) and sessions, one map per open
// session: id, user, ttl_ms, remaining_ms, locks, names (the first 16) and
// taken. A user limited to a pattern sees only its own sessions; USER, for
// an admin, narrows to one user's.
func (b *Bridge) sessions(r *request) {
	after, count, user := uint64(0), defaultListCount, ""
	for i := 1; i < len(r.args); i += 2 {
		if i+1 >= len(r.args) {
			writeError(r.c, errOption(r.args[i], "AFTER id, COUNT n or USER name, each with its value"))
			return
		}
		v := string(r.args[i+1])
		switch strings.ToUpper(string(r.args[i])) {
		case "AFTER":
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				writeError(r.c, errSessionID(r.args[i+1]))
				return
			}
			after = n
		case "COUNT":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > server.MaxListCount {
				writeError(r.c, errArg("count", fmt.Sprintf("a whole number from 1 to %d", server.MaxListCount), r.args[i+1]))
				return
			}
			count = n
		case "USER":
			user = v
		default:
			writeError(r.c, errOption(r.args[i], "AFTER id, COUNT n or USER name"))
			return
		}
	}
	if u := r.conn.user; u != nil && u.Pattern != "*" {
		if user != "" && user != u.Name {
			writeError(r.c, wire.Error{Code: wire.NoPerm, Text: fmt.Sprintf("User %s may list only its own sessions", u.Name)})
			return
		}
		user = u.Name
	}
	ctx, cancel := b.requestCtx(0)
	defer cancel()
	p, err := b.locker.Sessions(ctx, after, count, user)
	if err != nil {
		b.fail(ctx, r, err)
		return
	}
	r.mapHeader(3)
	r.writeInts("position", int64(p.Position), "next", int64(p.Next))
	r.c.WriteBulkString("sessions")
	r.c.WriteArray(len(p.Sessions))
	for _, s := range p.Sessions {
		r.mapHeader(7)
		r.writeFields2("user", s.User)
		r.writeInts("id", int64(s.ID), "ttl_ms", s.TTL.Milliseconds(), "remaining_ms", s.Remaining.Milliseconds(), "locks", int64(s.Locks), "taken", int64(s.Taken))
		r.c.WriteBulkString("names")
		r.c.WriteArray(len(s.Names))
		for _, n := range s.Names {
			r.c.WriteBulkString(n)
		}
	}
}

// writeFields2 writes pairs of strings as map entries (the header written
// by the caller).
func (r *request) writeFields2(kv ...string) {
	for _, s := range kv {
		r.c.WriteBulkString(s)
	}
}

// writeInts writes pairs of a name and an integer as map entries.
func (r *request) writeInts(kv ...any) {
	for i := 0; i+1 < len(kv); i += 2 {
		r.c.WriteBulkString(kv[i].(string))
		r.c.WriteInt64(kv[i+1].(int64))
	}
}

// remainingMS is a holder's time left in milliseconds, -1 for none (a
// value stored without a TTL).
func remainingMS(d time.Duration) int64 {
	if d == server.NoExpiry {
		return -1
	}
	return d.Milliseconds()
}

func modeName(m fsm.Mode) string {
	switch m {
	case fsm.ModeRead:
		return "read"
	case fsm.ModeWrite:
		return "write"
	case fsm.ModePermit:
		return "permit"
	}
	return ""
}
