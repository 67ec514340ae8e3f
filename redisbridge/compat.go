package redisbridge

import (
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/internal/resp"
	"github.com/fencerlock/fencer/rediscompat"
	"github.com/tidwall/match"
	"github.com/tidwall/redcon"
)

// compat serves a Redis command or script through the Redis-compatible
// layer. A follower's NotLeaderError is forwarded as any command's is; an
// EVALSHA of a script this node knows goes to the leader as EVAL, so that a
// leader that never saw the script still runs it.
func (b *Bridge) compat(r *request) {
	wait := time.Duration(0)
	if c := commands[strings.ToLower(string(r.args[0]))]; c != nil && c.flags&blocking != 0 {
		wait = blockingWait(r.args)
	}
	ctx, cancel := b.requestCtx(wait)
	defer cancel()
	if wait > 0 {
		// A client that hangs up while BLPOP waits stops the wait.
		stop := b.hangups.watch(r.c.NetConn(), cancel)
		defer stop()
	}
	sess := &rediscompat.Session{RESP3: r.conn.proto == 3, Allowed: allowedKeys(r.conn.user)}
	reply, err := b.engine.Do(ctx, sess, r.args)
	if err != nil {
		b.fail(ctx, r.withEvalBody(b.engine), err)
		return
	}
	writeReply(r.c, r.conn.proto, reply)
}

// maxBlockingWait bounds BLPOP's and BRPOP's wait, also with timeout 0
// (forever in Redis).
const maxBlockingWait = time.Hour

// blockingWait is how long a blocking command (BLPOP, BRPOP: flagged
// blocking in the table, their timeout last) may wait: its timeout, or
// maxBlockingWait for 0.
func blockingWait(args [][]byte) time.Duration {
	if len(args) < 3 {
		return 0
	}
	secs, err := strconv.ParseFloat(string(args[len(args)-1]), 64)
	if err != nil || secs < 0 {
		return 0
	}
	if secs == 0 || secs > maxBlockingWait.Seconds() {
		return maxBlockingWait
	}
	return time.Duration(secs * float64(time.Second))
}

// withEvalBody returns r, or for an EVALSHA of a script engine knows, the
// same request as EVAL with the script's text.
func (r *request) withEvalBody(engine *rediscompat.Engine) *request {
	name := strings.ToLower(string(r.args[0]))
	if (name != "evalsha" && name != "evalsha_ro") || len(r.args) < 3 {
		return r
	}
	body, ok := engine.Script(string(r.args[1]))
	if !ok {
		return r
	}
	args := append([][]byte{[]byte("eval" + strings.TrimPrefix(name, "evalsha"))}, r.args[1:]...)
	args[1] = []byte(body)
	cp := *r
	cp.args = args
	cp.raw = resp.AppendCommand(nil, args...)
	return &cp
}

// allowedKeys is the key check of a user's pattern; nil allows every key.
func allowedKeys(u *User) func(string) bool {
	if u == nil || u.Pattern == "*" {
		return nil
	}
	return func(k string) bool { return match.Match(k, u.Pattern) }
}

// writeReply writes a reply of the Redis-compatible layer in the client's
// RESP version.
func writeReply(c redcon.Conn, proto int, r rediscompat.Reply) {
	switch r := r.(type) {
	case rediscompat.Status:
		c.WriteString(string(r))
	case rediscompat.Error:
		writeRelayed(c, string(r))
	case rediscompat.Int:
		c.WriteInt64(int64(r))
	case rediscompat.Bulk:
		c.WriteBulkString(string(r))
	case rediscompat.Nil:
		if proto == 3 {
			c.WriteRaw([]byte("_\r\n"))
		} else {
			c.WriteNull()
		}
	case rediscompat.NilArray:
		if proto == 3 {
			c.WriteRaw([]byte("_\r\n"))
		} else {
			c.WriteRaw([]byte("*-1\r\n"))
		}
	case rediscompat.Array:
		c.WriteArray(len(r))
		for _, x := range r {
			writeReply(c, proto, x)
		}
	case rediscompat.Map:
		if proto == 3 {
			c.WriteRaw([]byte("%" + strconv.Itoa(len(r)/2) + "\r\n"))
		} else {
			c.WriteArray(len(r))
		}
		for _, x := range r {
			writeReply(c, proto, x)
		}
	case rediscompat.Double:
		if proto == 3 {
			c.WriteRaw([]byte("," + strconv.FormatFloat(float64(r), 'g', 17, 64) + "\r\n"))
		} else {
			c.WriteBulkString(strconv.FormatFloat(float64(r), 'g', 17, 64))
		}
	case rediscompat.Bool:
		switch {
		case proto == 3 && bool(r):
			c.WriteRaw([]byte("#t\r\n"))
		case proto == 3:
			c.WriteRaw([]byte("#f\r\n"))
		case bool(r):
			c.WriteInt(1)
		default:
			c.WriteInt(0)
		}
	default:
		writeError(c, errf("internal: a reply of an unknown type"))
	}
}
