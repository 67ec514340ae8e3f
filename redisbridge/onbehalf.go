package redisbridge

import (
	"context"
	"strings"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/server"
)

// A request a follower forwards reaches the leader over a connection the
// follower authenticated as its forwarding user, whose pattern is "*". So
// that the leader checks the request against the rights of the user who
// sent it (a script's undeclared keys, KEYS, whose a session is), the
// follower wraps it:
//
//	FENCE.ONBEHALF user pattern command [arg ...]
//
// which the leader accepts only on a connection marked by FENCE.FORWARDED
// (an admin command), and runs command as that user. An older leader
// refuses the unknown command and runs nothing: a forwarded request never
// runs with more rights than its user's.

// onBehalf returns what to forward for a request with args (raw encoded)
// from st's client: raw itself without authentication, else raw wrapped in
// FENCE.ONBEHALF with the client's user.
func onBehalf(st *connState, raw []byte, args [][]byte) []byte {
	u := st.user
	if u == nil {
		return raw
	}
	wrapped := append([][]byte{[]byte("FENCE.ONBEHALF"), []byte(u.Name), []byte(u.Pattern)}, args...)
	return resp.AppendCommand(nil, wrapped...)
}

// onbehalf: FENCE.ONBEHALF user pattern command [arg ...] → command's
// reply, run as user with pattern. Only on a forwarding node's connection.
func (b *Bridge) onbehalf(r *request) {
	if !r.conn.forwarded {
		writeError(r.c, errf("FENCE.ONBEHALF is sent only by a node forwarding a request (after FENCE.FORWARDED)"))
		return
	}
	if b.authRequired() {
		r.conn.user = &User{Name: string(r.args[1]), Pattern: string(r.args[2])}
	}
	inner := r.args[3:]
	b.dispatch(r.c, r.conn, inner, resp.AppendCommand(nil, inner...))
}

// The client a forwarded command came from travels with it, so that the
// leader records who took a lock (server.ClientInfo): a follower wraps
// what it forwards as
//
//	FENCE.ONBEHALFCLIENT user pattern addr name command [arg ...]
//
// (user and pattern empty without authentication), accepted, as
// FENCE.ONBEHALF is, only on a forwarding connection. An older leader
// does not know the command and runs nothing; the follower then sends
// FENCE.ONBEHALF (or the bare command) instead, and for a while sends it
// that form at once (oldLeaderFor).

// oldLeaderFor is how long a follower goes on forwarding the older form
// to a leader that did not know FENCE.ONBEHALFCLIENT before trying again:
// an upgrade restarts it within that time or keeps it old.
const oldLeaderFor = time.Minute

// forward sends r's command (raw, args) to the leader at addr, with r's
// client.
func (b *Bridge) forward(ctx context.Context, addr string, r *request, raw []byte, args [][]byte) (reply []byte, sent bool, err error) {
	if !b.fwd.old(addr) {
		reply, sent, err = b.fwd.roundTrip(ctx, addr, r.conn.proto, onBehalfClient(r, args))
		if err != nil || !unknownOnBehalfClient(reply) {
			return reply, sent, err
		}
		b.fwd.markOld(addr, time.Now().Add(oldLeaderFor))
	}
	return b.fwd.roundTrip(ctx, addr, r.conn.proto, onBehalf(r.conn, raw, args))
}

// onBehalfClient wraps args in FENCE.ONBEHALFCLIENT with r's client.
func onBehalfClient(r *request, args [][]byte) []byte {
	var user, pattern string
	if u := r.conn.user; u != nil {
		user, pattern = u.Name, u.Pattern
	}
	c, _ := r.client() // (never on a forwarded connection: it is not forwarded again)
	wrapped := append([][]byte{[]byte("FENCE.ONBEHALFCLIENT"), []byte(user), []byte(pattern), []byte(c.Addr), []byte(c.Name)}, args...)
	return resp.AppendCommand(nil, wrapped...)
}

// unknownOnBehalfClient reports whether reply is an older leader's refusal
// of FENCE.ONBEHALFCLIENT as an unknown command (nothing ran).
func unknownOnBehalfClient(reply []byte) bool {
	const refusal = "-err unknown command 'fence.onbehalfclient'"
	return len(reply) >= len(refusal) && strings.EqualFold(string(reply[:len(refusal)]), refusal)
}

// onbehalfclient: FENCE.ONBEHALFCLIENT user pattern addr name command
// [arg ...] → command's reply, run as user with pattern (when
// authentication is on) for the client at addr named name. Only on a
// forwarding node's connection.
func (b *Bridge) onbehalfclient(r *request) {
	if !r.conn.forwarded {
		writeError(r.c, errf("FENCE.ONBEHALFCLIENT is sent only by a node forwarding a request (after FENCE.FORWARDED)"))
		return
	}
	user := string(r.args[1])
	if b.authRequired() && user != "" {
		// (Without a user, from a node without authentication, it runs
		// as the forwarding node's user, as a bare command does.)
		r.conn.user = &User{Name: user, Pattern: string(r.args[2])}
	}
	if user == "" {
		user = "default"
	}
	r.conn.origin = &server.ClientInfo{User: user, Addr: string(r.args[3]), Name: string(r.args[4])}
	inner := r.args[5:]
	b.dispatch(r.c, r.conn, inner, resp.AppendCommand(nil, inner...))
}

// client is the client r came from: the one a forwarding node named, or
// r's own connection. It is unknown (false) for a command an older node
// forwarded without naming it: the connection is the node's.
func (r *request) client() (server.ClientInfo, bool) {
	if o := r.conn.origin; o != nil {
		return *o, true
	}
	if r.conn.forwarded {
		return server.ClientInfo{}, false
	}
	c := server.ClientInfo{User: "default", Addr: r.c.RemoteAddr(), Name: r.conn.name}
	if u := r.conn.user; u != nil {
		c.User = u.Name
	}
	return c, true
}
