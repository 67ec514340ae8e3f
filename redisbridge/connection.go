package redisbridge

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/internal/version"
	"github.com/fencerlock/fencer/wire"
)

// Connection commands: what Redis clients send when they connect, and the
// RESP3 framing of the replies whose types differ from RESP2's.

// redisVersion is the Redis version whose commands fencer answers like, as
// reported by HELLO and INFO: clients that gate features on it see a
// Redis 7.2.
const redisVersion = "7.2.0"

// null writes a null in the connection's protocol.
func (r *request) null() {
	if r.conn.proto == 3 {
		r.c.WriteRaw([]byte("_\r\n"))
		return
	}
	r.c.WriteNull()
}

// mapHeader starts a map of n pairs: a RESP3 map, or a flat RESP2 array.
func (r *request) mapHeader(n int) {
	if r.conn.proto == 3 {
		r.c.WriteRaw(fmt.Appendf(nil, "%%%d\r\n", n))
		return
	}
	r.c.WriteArray(2 * n)
}

// verbatim writes text as a RESP3 verbatim string, or a RESP2 bulk string,
// as Redis answers INFO and CLIENT INFO.
func (r *request) verbatim(text string) {
	if r.conn.proto == 3 {
		r.c.WriteRaw(fmt.Appendf(nil, "=%d\r\ntxt:%s\r\n", len(text)+4, text))
		return
	}
	r.c.WriteBulkString(text)
}

func (b *Bridge) echo(r *request) {
	r.c.WriteBulk(r.args[1])
}

// hello: HELLO [protover [AUTH username password] [SETNAME clientname]]
// → the server map, in the protocol just chosen.
func (b *Bridge) hello(r *request) {
	proto := r.conn.proto
	i := 1
	if len(r.args) > 1 {
		v, err := strconv.ParseInt(string(r.args[1]), 10, 64)
		if err != nil {
			writeError(r.c, errf("Protocol version is not an integer or out of range"))
			return
		}
		if v < 2 || v > 3 {
			writeError(r.c, wire.Error{Code: wire.NoProto, Text: "unsupported protocol version"})
			return
		}
		proto, i = int(v), 2
	}
	var name []byte
	setName := false
	for ; i < len(r.args); i++ {
		opt, more := strings.ToLower(string(r.args[i])), len(r.args)-i-1
		switch {
		case opt == "auth" && more >= 2:
			if b.authRequired() {
				if !b.authenticate(r, r.args[i+1], r.args[i+2]) {
					return
				}
			} else if !authOK(r.args[i+1]) {
				writeError(r.c, wrongPass)
				return
			}
			i += 2
		case opt == "setname" && more >= 1:
			name, setName = r.args[i+1], true
			i++
		default:
			writeError(r.c, errf("Syntax error in HELLO option '%s'", r.args[i]))
			return
		}
	}
	if setName && !validClientAttr(name) {
		writeError(r.c, badClientName)
		return
	}
	if setName {
		r.conn.name = string(name)
	}
	r.conn.proto = proto
	r.mapHeader(7)
	r.c.WriteBulkString("server")
	r.c.WriteBulkString("fencer")
	r.c.WriteBulkString("version")
	r.c.WriteBulkString(redisVersion)
	r.c.WriteBulkString("proto")
	r.c.WriteInt(proto)
	r.c.WriteBulkString("id")
	r.c.WriteInt64(r.conn.id)
	r.c.WriteBulkString("mode")
	r.c.WriteBulkString("standalone")
	r.c.WriteBulkString("role")
	r.c.WriteBulkString("master")
	r.c.WriteBulkString("modules")
	r.c.WriteArray(0)
}

// Authentication is not configured: like a Redis whose default user has no
// password, any password of the default user is accepted, other users are
// refused, and AUTH with only a password is an error.
var (
	wrongPass     = wire.Error{Code: wire.WrongPass, Text: "invalid username-password pair or user is disabled."}
	noPassword    = errf("AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
	badClientName = errf("Client names cannot contain spaces, newlines or special characters.")
)

func authOK(user []byte) bool { return string(user) == "default" }

// auth: AUTH [username] password.
func (b *Bridge) auth(r *request) {
	switch {
	case len(r.args) > 3:
		writeError(r.c, errSyntax)
	case b.authRequired():
		user, pass := []byte(DefaultUser), r.args[1]
		if len(r.args) == 3 {
			user, pass = r.args[1], r.args[2]
		}
		if b.authenticate(r, user, pass) {
			r.c.WriteString("OK")
		}
	case len(r.args) == 2:
		writeError(r.c, noPassword)
	case !authOK(r.args[1]):
		writeError(r.c, wrongPass)
	default:
		r.c.WriteString("OK")
	}
}

// selectDB: SELECT index. fencer has one database, 0.
func (b *Bridge) selectDB(r *request) {
	v, err := strconv.ParseInt(string(r.args[1]), 10, 32)
	switch {
	case err != nil:
		writeError(r.c, errNotInteger)
	case v != 0:
		writeError(r.c, errf("DB index is out of range"))
	default:
		r.c.WriteString("OK")
	}
}

// validClientAttr reports whether v may be a client name or library
// attribute: printable ASCII without spaces, as Redis requires.
func validClientAttr(v []byte) bool {
	for _, c := range v {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// client: CLIENT ID | GETNAME | SETNAME name | SETINFO attr value | INFO.
func (b *Bridge) client(r *request) {
	sub := strings.ToLower(string(r.args[1]))
	arity := map[string]int{"id": 2, "getname": 2, "setname": 3, "setinfo": 4, "info": 2}
	n, ok := arity[sub]
	if !ok {
		writeError(r.c, errf("unknown subcommand '%s'. Try CLIENT HELP.", truncate(r.args[1], 128)))
		return
	}
	if len(r.args) != n {
		writeError(r.c, errf("wrong number of arguments for 'client|%s' command", sub))
		return
	}
	switch sub {
	case "id":
		r.c.WriteInt64(r.conn.id)
	case "getname":
		if r.conn.name == "" {
			r.null()
			return
		}
		r.c.WriteBulkString(r.conn.name)
	case "setname":
		if !validClientAttr(r.args[2]) {
			writeError(r.c, badClientName)
			return
		}
		r.conn.name = string(r.args[2])
		r.c.WriteString("OK")
	case "setinfo":
		attr := strings.ToLower(string(r.args[2]))
		if attr != "lib-name" && attr != "lib-ver" {
			writeError(r.c, errf("Unrecognized option '%s'", r.args[2]))
			return
		}
		if !validClientAttr(r.args[3]) {
			writeError(r.c, errf("%s cannot contain spaces, newlines or special characters.", r.args[2]))
			return
		}
		if attr == "lib-name" {
			r.conn.libName = string(r.args[3])
		} else {
			r.conn.libVer = string(r.args[3])
		}
		r.c.WriteString("OK")
	case "info":
		laddr := ""
		if nc := r.c.NetConn(); nc != nil {
			laddr = nc.LocalAddr().String()
		}
		sub := 0
		if r.conn.sub != nil {
			sub = r.conn.sub.count()
		}
		r.verbatim(fmt.Sprintf("id=%d addr=%s laddr=%s name=%s db=0 sub=%d lib-name=%s lib-ver=%s resp=%d\n",
			r.conn.id, r.c.RemoteAddr(), laddr, r.conn.name, sub, r.conn.libName, r.conn.libVer, r.conn.proto))
	}
}

// reset: RESET → RESET. Leaves every channel, returns to RESP2 and forgets
// the client name, as Redis does.
func (b *Bridge) reset(r *request) {
	if r.conn.sub != nil {
		b.hub.leaveAll(r.conn.sub)
	}
	b.unwatchAll(r.conn)
	r.conn.proto, r.conn.name, r.conn.libName, r.conn.libVer = 2, "", "", ""
	r.conn.user = nil // as Redis: RESET signs the connection out
	r.c.WriteString("RESET")
}

// info: INFO [section ...] → the sections clients look at: redis_version,
// loading:0 (ioredis waits for it), role:master. Every node answers as a
// master, because every node accepts every command.
func (b *Bridge) info(r *request) {
	want := map[string]bool{}
	for _, a := range r.args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := len(want) == 0 || want["all"] || want["everything"] || want["default"]
	leaderID, leaderAddr := b.locker.Leader()
	fencerRole := "follower"
	if leaderID != "" && leaderID == b.locker.ID() {
		fencerRole = "leader"
	}
	port := ""
	if b.ln != nil {
		if i := strings.LastIndexByte(b.ln.Addr().String(), ':'); i >= 0 {
			port = b.ln.Addr().String()[i+1:]
		}
	}
	up := time.Since(b.start)
	build := version.Get()
	sections := []struct{ name, body string }{
		{"server", fmt.Sprintf("redis_version:%s\r\nredis_mode:standalone\r\nfencer_version:%s\r\nfencer_commit:%s\r\nfencer_commit_time:%s\r\nfencer_node_id:%s\r\nfencer_cluster_id:%s\r\nfencer_role:%s\r\nfencer_leader:%s\r\nfencer_format_readable:%d\r\nfencer_format_in_use:%d\r\nprocess_id:%d\r\ntcp_port:%s\r\nuptime_in_seconds:%d\r\nuptime_in_days:%d\r\n",
			redisVersion, build.Version, build.Revision, build.Time, b.locker.ID(), b.locker.ClusterID(), fencerRole, leaderAddr, b.locker.Progress().FormatReadable, b.locker.FormatInUse(), os.Getpid(), port, int64(up.Seconds()), int64(up.Hours()/24))},
		{"clients", fmt.Sprintf("connected_clients:%d\r\n", b.connCount())},
		{"persistence", "loading:0\r\naof_enabled:0\r\n"},
		{"replication", "role:master\r\nconnected_slaves:0\r\n"},
		{"keyspace", ""},
	}
	var sb strings.Builder
	for _, s := range sections {
		if !all && !want[s.name] {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteString("\r\n")
		}
		sb.WriteString("# " + strings.ToUpper(s.name[:1]) + s.name[1:] + "\r\n" + s.body)
	}
	r.verbatim(sb.String())
}

// connCount is the number of client connections, for INFO.
func (b *Bridge) connCount() int64 {
	return b.open.Load()
}

// wait: WAIT numreplicas timeout → the followers every acknowledged write
// has reached, at once. Redis answers how many replicas acknowledged the
// connection's writes, waiting up to timeout for numreplicas of them;
// fencer acknowledges a write only once a quorum of the cluster has it, so
// a quorum less the leader, members/2 followers (1 of 2 or 3, 2 of 4 or 5;
// 0 on one node, as Redis without replicas), hold every write this
// connection was answered for, and waiting would not make the number
// larger that fencer can vouch for. Redisson sends it after a lock's write
// when configured with replicas (docs/redlock.md).
func (b *Bridge) wait(r *request) {
	if _, err := strconv.ParseInt(string(r.args[1]), 10, 64); err != nil {
		writeError(r.c, errNotInteger)
		return
	}
	timeout, err := strconv.ParseInt(string(r.args[2]), 10, 64)
	if err != nil {
		writeError(r.c, errf("timeout is not an integer or out of range"))
		return
	}
	if timeout < 0 {
		writeError(r.c, errf("timeout is negative"))
		return
	}
	members := len(b.locker.PeerAddrs()) + 1
	r.c.WriteInt(members / 2)
}
