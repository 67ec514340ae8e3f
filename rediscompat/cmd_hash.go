package rediscompat

import (
	"math"
	"strconv"

	"github.com/fencerlock/fencer/fsm"
)

func init() {
	register(
		&command{name: "hset", arity: -4, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Sets fields of a hash.", run: cmdHset},
		&command{name: "hmset", arity: -4, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Sets fields of a hash.", run: cmdHmset},
		&command{name: "hsetnx", arity: 4, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Sets a field of a hash only if it does not exist.", run: cmdHsetnx},
		&command{name: "hget", arity: 3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Returns the value of a field of a hash.", run: ofKey(fsm.KindHash, Nil{}, cmdHget)},
		&command{name: "hmget", arity: -3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Returns the values of fields of a hash.", run: cmdHmget},
		&command{name: "hgetall", arity: 2, flags: fReadOnly, first: 1, last: 1, step: 1, group: "hash", summary: "Returns every field and value of a hash.", run: cmdHgetall},
		&command{name: "hkeys", arity: 2, flags: fReadOnly, first: 1, last: 1, step: 1, group: "hash", summary: "Returns the fields of a hash.", run: func(c *call) Reply { return hashList(c, true, false) }},
		&command{name: "hvals", arity: 2, flags: fReadOnly, first: 1, last: 1, step: 1, group: "hash", summary: "Returns the values of a hash.", run: func(c *call) Reply { return hashList(c, false, true) }},
		&command{name: "hdel", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Deletes fields of a hash.", run: ofKey(fsm.KindHash, zero, cmdHdel)},
		&command{name: "hexists", arity: 3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Reports whether a field exists in a hash.", run: ofKey(fsm.KindHash, zero, cmdHexists)},
		&command{name: "hlen", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Returns the number of fields of a hash.", run: ofKey(fsm.KindHash, zero, cmdHlen)},
		&command{name: "hstrlen", arity: 3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Returns the length of a field's value.", run: ofKey(fsm.KindHash, zero, cmdHstrlen)},
		&command{name: "hincrby", arity: 4, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Increments a field's integer value.", run: cmdHincrby},
		&command{name: "hincrbyfloat", arity: 4, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "hash", summary: "Increments a field's floating point value.", run: cmdHincrbyfloat},
	)
}

func (c *call) hashOf(key string) (*entry, Reply) { return c.getKind(key, fsm.KindHash) }

func cmdHset(c *call) Reply {
	if len(c.args)%2 != 0 {
		return wrongArity(c.arg(0))
	}
	e, bad := c.hashOf(c.arg(1))
	if bad != nil {
		return bad
	}
	if !e.exists {
		c.d.create(e, fsm.KindHash)
	}
	n := 0
	for i := 2; i < len(c.args); i += 2 {
		if e.h.set(c.arg(i), c.arg(i+1)) {
			n++
		}
	}
	c.d.mutated(e)
	return Int(n)
}

// cmdHmset is HSET answering OK.
func cmdHmset(c *call) Reply {
	if r := cmdHset(c); isError(r) {
		return r
	}
	return replyOK
}

func isError(r Reply) bool {
	_, is := r.(Error)
	return is
}

func cmdHsetnx(c *call) Reply {
	e, bad := c.hashOf(c.arg(1))
	if bad != nil {
		return bad
	}
	if e.exists {
		if _, has := e.h.get(c.arg(2)); has {
			return zero
		}
	} else {
		c.d.create(e, fsm.KindHash)
	}
	e.h.set(c.arg(2), c.arg(3))
	c.d.mutated(e)
	return one
}

func cmdHget(c *call, e *entry) Reply {
	return bulkOrNil(e.h.get(c.arg(2)))
}

func cmdHmget(c *call) Reply {
	e, bad := c.hashOf(c.arg(1))
	if bad != nil {
		return bad
	}
	out := make(Array, 0, len(c.args)-2)
	for _, f := range c.args[2:] {
		if !e.exists {
			out = append(out, Nil{})
			continue
		}
		out = append(out, bulkOrNil(e.h.get(string(f))))
	}
	return out
}

func cmdHgetall(c *call) Reply {
	e, bad := c.hashOf(c.arg(1))
	if bad != nil {
		return bad
	}
	var out []Reply
	if e.exists {
		for _, f := range e.h.fields {
			out = append(out, Bulk(f), Bulk(e.h.values[f]))
		}
	}
	if c.resp3 {
		return Map(out)
	}
	return Array(out)
}

func hashList(c *call, fields, values bool) Reply {
	e, bad := c.hashOf(c.arg(1))
	if bad != nil {
		return bad
	}
	out := Array{}
	if e.exists {
		for _, f := range e.h.fields {
			if fields {
				out = append(out, Bulk(f))
			}
			if values {
				out = append(out, Bulk(e.h.values[f]))
			}
		}
	}
	return out
}

func cmdHdel(c *call, e *entry) Reply {
	return c.removeEach(e, e.h.del)
}

func cmdHexists(c *call, e *entry) Reply {
	_, has := e.h.get(c.arg(2))
	return boolInt(has)
}

func cmdHlen(c *call, e *entry) Reply {
	return Int(e.h.len())
}

func cmdHstrlen(c *call, e *entry) Reply {
	v, _ := e.h.get(c.arg(2))
	return Int(len(v))
}

func cmdHincrby(c *call) Reply {
	by, ok := parseInt(c.args[3])
	if !ok {
		return errNotInteger
	}
	e, bad := c.hashOf(c.arg(1))
	if bad != nil {
		return bad
	}
	var cur int64
	if e.exists {
		if v, has := e.h.get(c.arg(2)); has {
			n, ok := parseStrictInt(v)
			if !ok {
				return Error("ERR hash value is not an integer")
			}
			cur = n
		}
	}
	if by > 0 && cur > math.MaxInt64-by || by < 0 && cur < math.MinInt64-by {
		return errOverflow
	}
	cur += by
	if !e.exists {
		c.d.create(e, fsm.KindHash)
	}
	e.h.set(c.arg(2), strconv.FormatInt(cur, 10))
	c.d.mutated(e)
	return Int(cur)
}

func cmdHincrbyfloat(c *call) Reply {
	by, ok := parseFloat(c.args[3])
	if !ok {
		return errNotFloat
	}
	e, bad := c.hashOf(c.arg(1))
	if bad != nil {
		return bad
	}
	var cur float64
	if e.exists {
		if v, has := e.h.get(c.arg(2)); has {
			f, ok := parseFloat([]byte(v))
			if !ok {
				return Error("ERR hash value is not a float")
			}
			cur = f
		}
	}
	cur += by
	if math.IsNaN(cur) || math.IsInf(cur, 0) {
		return errNaN
	}
	if !e.exists {
		c.d.create(e, fsm.KindHash)
	}
	s := formatIncrFloat(cur)
	e.h.set(c.arg(2), s)
	c.d.mutated(e)
	return Bulk(s)
}
