package redisbridge

import (
	"log/slog"
	"strings"
)

// The audit trail: every administrative command is logged, at level info
// with msg "audit", by the node the client sent it to, naming the user and
// the client's address and name. A command a node forwards to the leader
// is logged where it arrived, which is where the user is known; the leader
// does not log it again.

// audited reports whether the command name with args is administrative,
// and names its action.
func audited(name string, args [][]byte) (action string, ok bool) {
	switch name {
	case "fence.revoke", "fence.transfer", "fence.join", "fence.remove", "fence.snapshot":
		return strings.TrimPrefix(name, "fence."), true
	case "fence.session":
		if len(args) > 1 && strings.EqualFold(string(args[1]), "revoke") {
			return "session revoke", true
		}
	}
	return "", false
}

// audit logs an administrative command about to run on st's connection.
func (b *Bridge) audit(r *request, action string) {
	if r.conn.forwarded {
		return
	}
	user := "default"
	if r.conn.user != nil {
		user = r.conn.user.Name
	}
	target := make([]string, 0, len(r.args)-1)
	for _, a := range r.args[1:] {
		target = append(target, truncate(a, 128))
	}
	if action == "session revoke" {
		target = target[1:]
	}
	b.log.Info("audit", slog.String("action", action), slog.String("args", strings.Join(target, " ")),
		slog.String("user", user), slog.String("remote", r.c.RemoteAddr()), slog.String("client_name", r.conn.name),
		slog.String("node", b.locker.ID()))
}
