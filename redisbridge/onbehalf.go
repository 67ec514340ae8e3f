package redisbridge

import (
	"github.com/fencerlock/fencer/internal/resp"
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
