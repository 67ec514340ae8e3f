package rediscompat

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

func init() {
	register(
		&command{name: "get", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Returns the string value of a key.", run: cmdGet},
		&command{name: "set", arity: -3, flags: fWrite, first: 1, last: 1, step: 1, group: "string", summary: "Sets the string value of a key, with an expire time, or only if it exists or not.", run: cmdSet},
		&command{name: "setnx", arity: 3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Sets a key's value only if it does not exist (for the default lock TTL).", run: cmdSetnx},
		&command{name: "setex", arity: 4, flags: fWrite, first: 1, last: 1, step: 1, group: "string", summary: "Sets a key's value and its expire time in seconds.", run: func(c *call) Reply { return setex(c, time.Second) }},
		&command{name: "psetex", arity: 4, flags: fWrite, first: 1, last: 1, step: 1, group: "string", summary: "Sets a key's value and its expire time in milliseconds.", run: func(c *call) Reply { return setex(c, time.Millisecond) }},
		&command{name: "getset", arity: 3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Sets a key's value and returns the old one.", run: cmdGetset},
		&command{name: "getdel", arity: 2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Returns a key's value and deletes the key.", run: cmdGetdel},
		&command{name: "getex", arity: -2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Returns a key's value and sets or removes its expire time.", run: cmdGetex},
		&command{name: "mget", arity: -2, flags: fReadOnly | fFast, first: 1, last: -1, step: 1, group: "string", summary: "Returns the values of several keys.", run: cmdMget},
		&command{name: "mset", arity: -3, flags: fWrite, first: 1, last: -1, step: 2, group: "string", summary: "Sets several keys' values.", run: func(c *call) Reply { return mset(c, false) }},
		&command{name: "msetnx", arity: -3, flags: fWrite, first: 1, last: -1, step: 2, group: "string", summary: "Sets several keys' values only if none of them exists.", run: func(c *call) Reply { return mset(c, true) }},
		&command{name: "incr", arity: 2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Increments a key's integer value by one.", run: func(c *call) Reply { return incrBy(c, 1) }},
		&command{name: "decr", arity: 2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Decrements a key's integer value by one.", run: func(c *call) Reply { return incrBy(c, -1) }},
		&command{name: "incrby", arity: 3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Increments a key's integer value by a number.", run: cmdIncrby},
		&command{name: "decrby", arity: 3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Decrements a key's integer value by a number.", run: cmdDecrby},
		&command{name: "incrbyfloat", arity: 3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Increments a key's value by a floating point number.", run: cmdIncrbyfloat},
		&command{name: "append", arity: 3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Appends a string to a key's value.", run: cmdAppend},
		&command{name: "getrange", arity: 4, flags: fReadOnly, first: 1, last: 1, step: 1, group: "string", summary: "Returns a substring of a key's value.", run: cmdGetrange},
		&command{name: "strlen", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "string", summary: "Returns the length of a key's value.", run: cmdStrlen},
	)
}

func cmdGet(c *call) Reply {
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	if v, ok := c.d.ghostGet(e); ok {
		return Bulk(v)
	}
	if !e.exists || e.ghostDone {
		return Nil{}
	}
	s := e.str
	e.readBy = &s
	return Bulk(e.str)
}

// setOptions are SET's options.
type setOptions struct {
	nx, xx, get, keep bool
	exp               expiry
}

func parseSet(c *call) (setOptions, Reply) {
	var o setOptions
	expiring := false
	for i := 3; i < len(c.args); i++ {
		opt := strings.ToUpper(c.arg(i))
		switch {
		case opt == "NX" && !o.xx:
			o.nx = true
		case opt == "XX" && !o.nx:
			o.xx = true
		case opt == "GET":
			o.get = true
		case opt == "KEEPTTL" && !expiring:
			o.keep = true
		case (opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") && !o.keep && !expiring && i+1 < len(c.args):
			unit := time.Millisecond
			if opt == "EX" || opt == "EXAT" {
				unit = time.Second
			}
			exp, bad := c.positiveExpiry(c.args[i+1], unit, strings.HasSuffix(opt, "AT"), "set")
			if bad != nil {
				return o, bad
			}
			o.exp = exp
			expiring = true
			i++
		default:
			return o, errSyntax
		}
	}
	return o, nil
}

func cmdSet(c *call) Reply {
	o, bad := parseSet(c)
	if bad != nil {
		return bad
	}
	key, value := c.arg(1), c.arg(2)
	e := c.get(key)
	if e == nil {
		return errStore
	}
	var old Reply = Nil{}
	if o.get {
		if e.exists && e.kind != fsm.KindString {
			return errWrongType
		}
		if e.exists {
			old = Bulk(e.str)
		}
	}
	refuse := func() Reply {
		if o.get {
			return old
		}
		return Nil{}
	}
	if c.d.multi && o.nx && e.exists && e.kind == fsm.KindString && e.str == value {
		// --redlock-multi-endpoint: the same value's acquire again
		// (through another node) is the same grant, renewed.
		if o.exp.set {
			c.d.setString(e, value, ttlSet, o.exp.ttl)
		}
		return replyOK
	}
	if o.nx && e.exists || o.xx && !e.exists || (o.nx || o.xx) && c.d.refusedValue(e, value) {
		return refuse()
	}
	switch {
	case o.keep:
		c.d.setString(e, value, ttlKeep, 0)
	case o.exp.set && o.exp.ttl <= 0:
		// An expire time already past: the key is set and gone at once.
		c.d.remove(e)
	case o.exp.set:
		c.d.setString(e, value, ttlSet, o.exp.ttl)
	case o.nx:
		// fencer never grants an endless lock: SET NX without an expire
		// time gets the default lock TTL.
		c.d.setString(e, value, ttlSet, c.e.cfg.DefaultLockTTL)
	default:
		c.d.setString(e, value, ttlNone, 0)
	}
	if o.get {
		return old
	}
	return replyOK
}

func cmdSetnx(c *call) Reply {
	e := c.get(c.arg(1))
	if e == nil {
		return errStore
	}
	if e.exists || c.d.refusedValue(e, c.arg(2)) {
		return zero
	}
	c.d.setString(e, c.arg(2), ttlSet, c.e.cfg.DefaultLockTTL)
	return one
}

func setex(c *call, unit time.Duration) Reply {
	exp, bad := c.positiveExpiry(c.args[2], unit, false, strings.ToLower(c.arg(0)))
	if bad != nil {
		return bad
	}
	e := c.get(c.arg(1))
	if e == nil {
		return errStore
	}
	c.d.setString(e, c.arg(3), ttlSet, exp.ttl)
	return replyOK
}

func cmdGetset(c *call) Reply {
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	old := bulkOrNil(e.str, e.exists)
	c.d.setString(e, c.arg(2), ttlNone, 0)
	return old
}

func cmdGetdel(c *call) Reply {
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	if !e.exists {
		return Nil{}
	}
	old := Bulk(e.str)
	c.d.remove(e)
	return old
}

func cmdGetex(c *call) Reply {
	var exp expiry
	persist := false
	for i := 2; i < len(c.args); i++ {
		opt := strings.ToUpper(c.arg(i))
		switch {
		case opt == "PERSIST" && !exp.set && !persist:
			persist = true
		case (opt == "EX" || opt == "PX" || opt == "EXAT" || opt == "PXAT") && !exp.set && !persist && i+1 < len(c.args):
			unit := time.Millisecond
			if opt == "EX" || opt == "EXAT" {
				unit = time.Second
			}
			var bad Reply
			if exp, bad = c.positiveExpiry(c.args[i+1], unit, strings.HasSuffix(opt, "AT"), "getex"); bad != nil {
				return bad
			}
			i++
		default:
			return errSyntax
		}
	}
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	if !e.exists {
		return Nil{}
	}
	v := Bulk(e.str)
	switch {
	case exp.set && exp.ttl <= 0:
		c.d.remove(e)
	case exp.set:
		c.d.setTTL(e, exp.ttl)
	case persist && e.pttl() >= 0:
		c.d.setTTL(e, -1)
	}
	return v
}

func cmdMget(c *call) Reply {
	out := make(Array, 0, len(c.args)-1)
	for _, k := range c.args[1:] {
		e := c.get(string(k))
		if e == nil {
			return errStore
		}
		if e.exists && e.kind == fsm.KindString {
			out = append(out, Bulk(e.str))
		} else {
			out = append(out, Nil{})
		}
	}
	return out
}

// mset serves MSET and, onlyIfNone, MSETNX: which sets nothing if any of
// the keys exists.
func mset(c *call, onlyIfNone bool) Reply {
	if len(c.args)%2 != 1 {
		return wrongArity(c.arg(0))
	}
	keys := make([]*entry, 0, len(c.args)/2)
	for i := 1; i < len(c.args); i += 2 {
		e := c.get(c.arg(i))
		if e == nil {
			return errStore
		}
		if onlyIfNone && (e.exists || c.d.refusedValue(e, c.arg(i+1))) {
			return zero
		}
		keys = append(keys, e)
	}
	for i, e := range keys {
		c.d.setString(e, c.arg(2*i+2), ttlNone, 0)
	}
	if onlyIfNone {
		return one
	}
	return replyOK
}

func cmdIncrby(c *call) Reply {
	by, ok := parseInt(c.args[2])
	if !ok {
		return errNotInteger
	}
	return incrBy(c, by)
}

func cmdDecrby(c *call) Reply {
	by, ok := parseInt(c.args[2])
	if !ok {
		return errNotInteger
	}
	if by == math.MinInt64 {
		return Error("ERR decrement would overflow")
	}
	return incrBy(c, -by)
}

func incrBy(c *call, by int64) Reply {
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	var cur int64
	if e.exists {
		v, ok := parseStrictInt(e.str)
		if !ok {
			return errNotInteger
		}
		cur = v
	}
	if by > 0 && cur > math.MaxInt64-by || by < 0 && cur < math.MinInt64-by {
		return errOverflow
	}
	cur += by
	c.d.setString(e, strconv.FormatInt(cur, 10), ttlKeep, 0)
	return Int(cur)
}

// parseStrictInt parses a stored value as Redis's string2ll does: no spaces,
// no plus sign, no leading zeros.
func parseStrictInt(s string) (int64, bool) {
	if s == "" || len(s) > 20 || s[0] == '+' || len(s) > 1 && s[0] == '0' || len(s) > 1 && s[0] == '-' && s[1] == '0' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

func cmdIncrbyfloat(c *call) Reply {
	by, ok := parseFloat(c.args[2])
	if !ok {
		return errNotFloat
	}
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	var cur float64
	if e.exists {
		v, ok := parseFloat([]byte(e.str))
		if !ok {
			return errNotFloat
		}
		cur = v
	}
	cur += by
	if math.IsNaN(cur) || math.IsInf(cur, 0) {
		return errNaN
	}
	s := formatIncrFloat(cur)
	c.d.setString(e, s, ttlKeep, 0)
	return Bulk(s)
}

func cmdAppend(c *call) Reply {
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	mode := ttlKeep
	if !e.exists {
		mode = ttlNone
	}
	c.d.setString(e, e.str+c.arg(2), mode, 0)
	return Int(len(e.str))
}

func cmdStrlen(c *call) Reply {
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	return Int(len(e.str))
}

func cmdGetrange(c *call) Reply {
	start, ok1 := parseInt(c.args[2])
	end, ok2 := parseInt(c.args[3])
	if !ok1 || !ok2 {
		return errNotInteger
	}
	e, bad := c.getKind(c.arg(1), fsm.KindString)
	if bad != nil {
		return bad
	}
	n := int64(len(e.str))
	if start < 0 && end < 0 && start > end {
		return Bulk("")
	}
	if start < 0 {
		start = max(n+start, 0)
	}
	if end < 0 {
		end = max(n+end, 0)
	}
	end = min(end, n-1)
	if start > end || n == 0 {
		return Bulk("")
	}
	return Bulk(e.str[start : end+1])
}
