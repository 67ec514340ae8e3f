package rediscompat

import (
	"strings"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/tidwall/match"
)

func init() {
	register(
		&command{name: "del", arity: -2, flags: fWrite, first: 1, last: -1, step: 1, group: "generic", summary: "Deletes keys.", run: cmdDel},
		&command{name: "unlink", arity: -2, flags: fWrite | fFast, first: 1, last: -1, step: 1, group: "generic", summary: "Deletes keys.", run: cmdDel},
		&command{name: "exists", arity: -2, flags: fReadOnly | fFast, first: 1, last: -1, step: 1, group: "generic", summary: "Counts the keys that exist.", run: cmdExists},
		&command{name: "type", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Returns the type of a key's value.", run: cmdType},
		&command{name: "expire", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Sets a key's expire time in seconds.", run: func(c *call) Reply { return expireCmd(c, time.Second, false) }},
		&command{name: "pexpire", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Sets a key's expire time in milliseconds.", run: func(c *call) Reply { return expireCmd(c, time.Millisecond, false) }},
		&command{name: "expireat", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Sets a key's expire time as a Unix time in seconds (the leader's wall clock).", run: func(c *call) Reply { return expireCmd(c, time.Second, true) }},
		&command{name: "pexpireat", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Sets a key's expire time as a Unix time in milliseconds (the leader's wall clock).", run: func(c *call) Reply { return expireCmd(c, time.Millisecond, true) }},
		&command{name: "ttl", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Returns a key's remaining time to live in seconds.", run: func(c *call) Reply { return ttlCmd(c, time.Second, false) }},
		&command{name: "pttl", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Returns a key's remaining time to live in milliseconds.", run: func(c *call) Reply { return ttlCmd(c, time.Millisecond, false) }},
		&command{name: "expiretime", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Returns a key's expire time as a Unix time in seconds (the leader's wall clock).", run: func(c *call) Reply { return ttlCmd(c, time.Second, true) }},
		&command{name: "pexpiretime", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Returns a key's expire time as a Unix time in milliseconds (the leader's wall clock).", run: func(c *call) Reply { return ttlCmd(c, time.Millisecond, true) }},
		&command{name: "keys", arity: 2, flags: fReadOnly, group: "generic", summary: "Returns the keys matching a pattern (reads the whole keyspace, and the entry of a script that calls it is guarded on the listing).", run: cmdKeys},
		&command{name: "persist", arity: 2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "generic", summary: "Removes a key's expire time.", run: cmdPersist},
	)
}

func cmdDel(c *call) Reply {
	n := 0
	for _, k := range c.args[1:] {
		e := c.get(string(k))
		if e == nil {
			return errStore
		}
		switch {
		case e.ghost != "" && !e.ghostDone:
			// A repeated release through another node (a GET saw the
			// ghost, see ghostGet): the value's lock is gone already;
			// nothing changes, whoever holds the key now.
			e.ghostDone = true
			n++
		case e.ghost != "":
			// deleted already in this script
		case e.exists:
			c.d.remove(e)
			n++
		}
	}
	return Int(n)
}

func cmdExists(c *call) Reply {
	n := 0
	for _, k := range c.args[1:] {
		e := c.get(string(k))
		if e == nil {
			return errStore
		}
		if e.exists && !c.d.ownValue(e) {
			n++
		}
	}
	return Int(n)
}

func cmdType(c *call) Reply {
	e := c.get(c.arg(1))
	if e == nil {
		return errStore
	}
	if !e.exists {
		return Status("none")
	}
	return Status(typeName(e.kind))
}

func typeName(k fsm.Kind) string {
	switch k {
	case fsm.KindHash:
		return "hash"
	case fsm.KindZSet:
		return "zset"
	case fsm.KindList:
		return "list"
	case fsm.KindSet:
		return "set"
	case fsm.KindShared:
		return "fencer-shared" // a read-write lock or a semaphore
	}
	return "string"
}

// expireCmd: EXPIRE key seconds [NX|XX|GT|LT] and its kin. A time in the
// past deletes the key.
func expireCmd(c *call, unit time.Duration, absolute bool) Reply {
	exp, ok := c.parseExpiry(c.args[2], unit, absolute)
	if !ok {
		if _, isInt := parseInt(c.args[2]); isInt {
			return Error("ERR invalid expire time in '" + strings.ToLower(c.arg(0)) + "' command")
		}
		return errNotInteger
	}
	var o conditions
	for _, a := range c.args[3:] {
		if !o.parse(a) {
			return Error("ERR Unsupported option " + string(a))
		}
	}
	if o.nx && (o.xx || o.gt || o.lt) {
		return Error("ERR NX and XX, GT or LT options at the same time are not compatible")
	}
	if o.gt && o.lt {
		return Error("ERR GT and LT options at the same time are not compatible")
	}
	e := c.get(c.arg(1))
	if e == nil {
		return errStore
	}
	if !e.exists {
		return zero
	}
	cur := e.pttl() // -1: none
	switch {
	case o.nx && cur >= 0, o.xx && cur < 0:
		return zero
	case o.gt && (cur < 0 || exp.ttl <= cur):
		return zero
	case o.lt && cur >= 0 && exp.ttl >= cur:
		return zero
	}
	if exp.ttl <= 0 {
		c.d.remove(e)
		return one
	}
	c.d.setTTL(e, exp.ttl)
	return one
}

// ttlCmd: TTL, PTTL (remaining), EXPIRETIME, PEXPIRETIME (absolute): -2 for
// an absent key, -1 for one without a TTL.
func ttlCmd(c *call, unit time.Duration, absolute bool) Reply {
	e := c.get(c.arg(1))
	if e == nil {
		return errStore
	}
	d := e.pttl()
	if d < 0 {
		return Int(int64(d))
	}
	if absolute {
		at := c.d.now.Add(d).UnixNano()
		return Int(at / int64(unit))
	}
	if unit == time.Second {
		return Int(int64((d + 500*time.Millisecond) / time.Second))
	}
	return Int(int64((d + 500*time.Microsecond) / time.Millisecond))
}

func cmdPersist(c *call) Reply {
	e := c.get(c.arg(1))
	if e == nil {
		return errStore
	}
	if !e.exists || e.pttl() < 0 {
		return zero
	}
	c.d.setTTL(e, -1)
	return one
}

// cmdKeys: KEYS pattern, with this command's or script's own writes.
func cmdKeys(c *call) Reply {
	pattern := c.arg(1)
	if c.d.st == nil {
		return Array{}
	}
	listed := map[string]bool{}
	out := Array{}
	// A user limited to some names lists only those (Redis refuses KEYS to
	// a user whose ACL does not allow every key): no path lists a name the
	// user may not see.
	visible := func(k string) bool { return c.d.allowed == nil || c.d.allowed(k) }
	for _, k := range c.d.st.Keys(pattern) {
		listed[k] = true
		if e, ok := c.d.loaded(k); ok && !e.exists || !visible(k) {
			continue // deleted by this script, or not the user's
		}
		out = append(out, Bulk(k))
	}
	for _, e := range c.d.entries {
		if e.exists && !listed[e.key] && visible(e.key) && match.Match(e.key, pattern) {
			out = append(out, Bulk(e.key))
		}
	}
	return out
}
