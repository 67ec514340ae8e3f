package rediscompat

import "github.com/fencerlock/fencer/fsm"

func init() {
	register(
		&command{name: "sadd", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "set", summary: "Adds members to a set.", run: cmdSadd},
		&command{name: "srem", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "set", summary: "Removes members from a set.", run: ofKey(fsm.KindSet, zero, cmdSrem)},
		&command{name: "scard", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "set", summary: "Returns the number of members of a set.", run: ofKey(fsm.KindSet, zero, cmdScard)},
		&command{name: "sismember", arity: 3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "set", summary: "Reports whether a member is in a set.", run: cmdSismember},
		&command{name: "smismember", arity: -3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "set", summary: "Reports whether members are in a set.", run: cmdSmismember},
		&command{name: "smembers", arity: 2, flags: fReadOnly, first: 1, last: 1, step: 1, group: "set", summary: "Returns the members of a set.", run: cmdSmembers},
	)
}

func (c *call) setOf(key string) (*entry, Reply) { return c.getKind(key, fsm.KindSet) }

func cmdSadd(c *call) Reply {
	e, bad := c.setOf(c.arg(1))
	if bad != nil {
		return bad
	}
	if !e.exists {
		c.d.create(e, fsm.KindSet)
	}
	n := 0
	for _, m := range c.args[2:] {
		if e.set.add(string(m)) {
			n++
		}
	}
	c.d.mutated(e)
	return Int(n)
}

func cmdSrem(c *call, e *entry) Reply {
	return c.removeEach(e, e.set.remove)
}

func cmdScard(c *call, e *entry) Reply {
	return Int(e.set.len())
}

func cmdSismember(c *call) Reply {
	e, bad := c.setOf(c.arg(1))
	if bad != nil {
		return bad
	}
	return boolInt(e.exists && e.set.has[c.arg(2)])
}

func cmdSmismember(c *call) Reply {
	e, bad := c.setOf(c.arg(1))
	if bad != nil {
		return bad
	}
	out := make(Array, 0, len(c.args)-2)
	for _, m := range c.args[2:] {
		out = append(out, boolInt(e.exists && e.set.has[string(m)]))
	}
	return out
}

func cmdSmembers(c *call) Reply {
	e, bad := c.setOf(c.arg(1))
	if bad != nil {
		return bad
	}
	out := Array{}
	if e.exists {
		for _, m := range e.set.members {
			out = append(out, Bulk(m))
		}
	}
	return out
}
