package rediscompat

import (
	"strconv"
)

// The server, connection and pub/sub commands a script may call (the
// bridge answers them itself for clients): TIME, PUBLISH, SPUBLISH, PING,
// ECHO and SELECT.

func init() {
	register(
		&command{name: "time", arity: 1, flags: fNoTxn | fFast, group: "server", summary: "Returns the leader's time (or this node's, outside a script).", run: cmdTime},
		&command{name: "publish", arity: 3, flags: fNoTxn | fFast, group: "pubsub", summary: "Posts a message to a channel, on every node.", run: func(c *call) Reply { return publish(c, false) }},
		&command{name: "spublish", arity: 3, flags: fNoTxn | fFast, first: 1, last: 1, step: 1, group: "pubsub", summary: "Posts a message to a shard channel, on every node.", run: func(c *call) Reply { return publish(c, true) }},
		&command{name: "ping", arity: -1, flags: fNoTxn | fFast, group: "connection", summary: "Returns PONG.", run: cmdPing},
		&command{name: "echo", arity: 2, flags: fNoTxn | fFast, group: "connection", summary: "Returns the given string.", run: func(c *call) Reply { return Bulk(c.arg(1)) }},
		&command{name: "select", arity: 2, flags: fNoTxn | fFast, group: "connection", summary: "Selects the database: fencer has only 0.", run: cmdSelect},
	)
}

func cmdTime(c *call) Reply {
	now := c.d.now
	return Array{Bulk(strconv.FormatInt(now.Unix(), 10)), Bulk(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))}
}

func cmdSelect(c *call) Reply {
	n, ok := parseInt(c.args[1])
	switch {
	case !ok:
		return errNotInteger
	case n != 0:
		return Error("ERR DB index is out of range")
	}
	return replyOK
}

func cmdPing(c *call) Reply {
	switch len(c.args) {
	case 1:
		return Status("PONG")
	case 2:
		return Bulk(c.arg(1))
	}
	return wrongArity("ping")
}

// publish queues a message; it is sent once the command's entry commits (at
// once, for PUBLISH sent by a client). A script learns no receiver count: 0.
func publish(c *call, shard bool) Reply {
	c.d.pubs = append(c.d.pubs, publication{shard: shard, channel: c.arg(1), message: c.arg(2)})
	if c.script || c.e.cfg.Publish == nil {
		return zero
	}
	p := c.d.pubs[len(c.d.pubs)-1]
	c.d.pubs = c.d.pubs[:len(c.d.pubs)-1]
	return Int(c.e.cfg.Publish(p.shard, p.channel, []byte(p.message)))
}
