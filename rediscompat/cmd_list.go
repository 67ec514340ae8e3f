package rediscompat

import (
	"context"
	"strings"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/server"
)

func init() {
	register(
		&command{name: "lpush", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "list", summary: "Prepends elements to a list.", run: func(c *call) Reply { return push(c, true, false) }},
		&command{name: "rpush", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "list", summary: "Appends elements to a list.", run: func(c *call) Reply { return push(c, false, false) }},
		&command{name: "lpushx", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "list", summary: "Prepends elements to a list only if it exists.", run: func(c *call) Reply { return push(c, true, true) }},
		&command{name: "rpushx", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "list", summary: "Appends elements to a list only if it exists.", run: func(c *call) Reply { return push(c, false, true) }},
		&command{name: "lpop", arity: -2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "list", summary: "Removes and returns the first elements of a list.", run: func(c *call) Reply { return pop(c, true) }},
		&command{name: "rpop", arity: -2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "list", summary: "Removes and returns the last elements of a list.", run: func(c *call) Reply { return pop(c, false) }},
		&command{name: "llen", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "list", summary: "Returns the length of a list.", run: ofKey(fsm.KindList, zero, cmdLlen)},
		&command{name: "lrange", arity: 4, flags: fReadOnly, first: 1, last: 1, step: 1, group: "list", summary: "Returns a range of elements of a list.", run: ofRange(parseIntPair, fsm.KindList, Array{}, cmdLrange)},
		&command{name: "lindex", arity: 3, flags: fReadOnly, first: 1, last: 1, step: 1, group: "list", summary: "Returns an element of a list by its index.", run: cmdLindex},
		&command{name: "lset", arity: 4, flags: fWrite, first: 1, last: 1, step: 1, group: "list", summary: "Sets an element of a list by its index.", run: cmdLset},
		&command{name: "lrem", arity: 4, flags: fWrite, first: 1, last: 1, step: 1, group: "list", summary: "Removes elements equal to a value from a list.", run: cmdLrem},
		&command{name: "ltrim", arity: 4, flags: fWrite, first: 1, last: 1, step: 1, group: "list", summary: "Trims a list to a range.", run: ofRange(parseIntPair, fsm.KindList, replyOK, cmdLtrim)},
		&command{name: "lpos", arity: -3, flags: fReadOnly, first: 1, last: 1, step: 1, group: "list", summary: "Returns the index of an element of a list.", run: cmdLpos},
	)
}

func (c *call) listOf(key string) (*entry, Reply) { return c.getKind(key, fsm.KindList) }

func push(c *call, left, onlyIfExists bool) Reply {
	e, bad := c.listOf(c.arg(1))
	if bad != nil {
		return bad
	}
	if !e.exists {
		if onlyIfExists {
			return zero
		}
		c.d.create(e, fsm.KindList)
	}
	for _, v := range c.args[2:] {
		if left {
			e.l.items = append([]string{string(v)}, e.l.items...)
		} else {
			e.l.items = append(e.l.items, string(v))
		}
	}
	c.d.mutated(e)
	return Int(len(e.l.items))
}

// popCount parses the count of LPOP, RPOP, ZPOPMIN and ZPOPMAX (1 if
// none) and reports whether one was given.
func (c *call) popCount() (int64, bool, Reply) {
	switch len(c.args) {
	case 2:
		return 1, false, nil
	case 3:
		n, ok := parseInt(c.args[2])
		if !ok || n < 0 {
			return 0, false, Error("ERR value is out of range, must be positive")
		}
		return n, true, nil
	}
	return 0, false, errSyntax
}

func pop(c *call, left bool) Reply {
	count, withCount, bad := c.popCount()
	if bad != nil {
		return bad
	}
	e, r := c.existing(fsm.KindList, null(withCount))
	if e == nil {
		return r
	}
	out := Array{}
	for i := int64(0); i < count && len(e.l.items) > 0; i++ {
		if left {
			out = append(out, Bulk(e.l.items[0]))
			e.l.items = e.l.items[1:]
		} else {
			n := len(e.l.items) - 1
			out = append(out, Bulk(e.l.items[n]))
			e.l.items = e.l.items[:n]
		}
	}
	if count > 0 {
		c.d.mutated(e)
	}
	if !withCount {
		return out[0]
	}
	return out
}

func cmdLlen(c *call, e *entry) Reply {
	return Int(len(e.l.items))
}

func cmdLrange(c *call, e *entry, start, stop int64) Reply {
	out := Array{}
	if lo, hi, ok := rangeIndexes(start, stop, len(e.l.items)); ok {
		for _, v := range e.l.items[lo:hi] {
			out = append(out, Bulk(v))
		}
	}
	return out
}

// listElement loads the list at the command's key and finds the element its
// second argument, an index (negative from the end), names (LINDEX, LSET).
// It returns the list and the element's position; or nil and the reply:
// missing if there is no list, outOfRange if there is no such element.
func (c *call) listElement(missing, outOfRange Reply) (*entry, int, Reply) {
	i, ok := parseInt(c.args[2])
	if !ok {
		return nil, 0, errNotInteger
	}
	e, r := c.existing(fsm.KindList, missing)
	if e == nil {
		return nil, 0, r
	}
	n := int64(len(e.l.items))
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return nil, 0, outOfRange
	}
	return e, int(i), nil
}

func cmdLindex(c *call) Reply {
	e, i, r := c.listElement(Nil{}, Nil{})
	if e == nil {
		return r
	}
	return Bulk(e.l.items[i])
}

func cmdLset(c *call) Reply {
	e, i, r := c.listElement(errNoSuchKey, errIndexRange)
	if e == nil {
		return r
	}
	e.l.items[i] = c.arg(3)
	c.d.mutated(e)
	return replyOK
}

func cmdLrem(c *call) Reply {
	count, ok := parseInt(c.args[2])
	if !ok {
		return errNotInteger
	}
	e, r := c.existing(fsm.KindList, zero)
	if e == nil {
		return r
	}
	v := c.arg(3)
	items := e.l.items
	removed := 0
	if count >= 0 {
		out := items[:0:0]
		for _, it := range items {
			if it == v && (count == 0 || int64(removed) < count) {
				removed++
				continue
			}
			out = append(out, it)
		}
		e.l.items = out
	} else {
		keep := make([]bool, len(items))
		for i := len(items) - 1; i >= 0; i-- {
			keep[i] = true
			if items[i] == v && int64(removed) < -count {
				keep[i] = false
				removed++
			}
		}
		out := items[:0:0]
		for i, it := range items {
			if keep[i] {
				out = append(out, it)
			}
		}
		e.l.items = out
	}
	if removed > 0 {
		c.d.mutated(e)
	}
	return Int(removed)
}

func cmdLtrim(c *call, e *entry, start, stop int64) Reply {
	lo, hi, in := rangeIndexes(start, stop, len(e.l.items))
	if !in {
		e.l.items = nil
	} else {
		e.l.items = append([]string(nil), e.l.items[lo:hi]...)
	}
	c.d.mutated(e)
	return replyOK
}

// cmdLpos: LPOS key element [RANK rank] [COUNT num] [MAXLEN len].
func cmdLpos(c *call) Reply {
	rank, count, maxlen := int64(1), int64(-1), int64(0)
	for i := 3; i < len(c.args); i += 2 {
		if i+1 >= len(c.args) {
			return errSyntax
		}
		v, ok := parseInt(c.args[i+1])
		if !ok {
			return errNotInteger
		}
		switch strings.ToUpper(c.arg(i)) {
		case "RANK":
			if v == 0 {
				return Error("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
			}
			rank = v
		case "COUNT":
			if v < 0 {
				return Error("ERR COUNT can't be negative")
			}
			count = v
		case "MAXLEN":
			if v < 0 {
				return Error("ERR MAXLEN can't be negative")
			}
			maxlen = v
		default:
			return errSyntax
		}
	}
	e, bad := c.listOf(c.arg(1))
	if bad != nil {
		return bad
	}
	var found []int
	if e.exists {
		items := e.l.items
		n := len(items)
		skip := rank - 1
		step, i := 1, 0
		if rank < 0 {
			skip, step, i = -rank-1, -1, n-1
		}
		for scanned := int64(0); i >= 0 && i < n && (maxlen == 0 || scanned < maxlen); i, scanned = i+step, scanned+1 {
			if items[i] != c.arg(2) {
				continue
			}
			if skip > 0 {
				skip--
				continue
			}
			found = append(found, i)
			if count >= 0 && int64(len(found)) >= max(count, 1) && count != 0 {
				break
			}
			if count < 0 {
				break
			}
		}
	}
	if count < 0 {
		if len(found) == 0 {
			return Nil{}
		}
		return Int(found[0])
	}
	out := Array{}
	for _, f := range found {
		out = append(out, Int(f))
	}
	return out
}

func init() {
	register(
		// BLPOP and BRPOP wait in Engine.Do (blockingPop); from a script
		// Redis refuses them.
		&command{name: "blpop", arity: -3, flags: fWrite | fNoScript | fBlocking, first: 1, last: -2, step: 1, group: "list", summary: "Removes and returns the first element of the first non-empty list, or waits for one."},
		&command{name: "brpop", arity: -3, flags: fWrite | fNoScript | fBlocking, first: 1, last: -2, step: 1, group: "list", summary: "Removes and returns the last element of the first non-empty list, or waits for one."},
	)
}

// blockPoll is how often a waiting BLPOP or BRPOP looks at its lists again.
const blockPoll = 25 * time.Millisecond

// blockingPop serves BLPOP and BRPOP: the first element of the first
// non-empty list, taken in one transaction, or, once the timeout (or ctx)
// ends, the null array. It waits by looking again every blockPoll, each
// look a transaction of its own; ctx bounds it (the bridge gives it the
// timeout on top of the request's).
func (e *Engine) blockingPop(ctx context.Context, s *Session, cmd *command, args [][]byte) (Reply, error) {
	secs, ok := parseFloat(args[len(args)-1])
	if !ok {
		return Error("ERR timeout is not a float or out of range"), nil
	}
	if secs < 0 {
		return Error("ERR timeout is negative"), nil
	}
	keys := cmd.keysOf(args)
	for _, k := range keys {
		if s.Allowed != nil && !s.Allowed(k) {
			return errNoPermKey, nil
		}
	}
	var end <-chan time.Time
	if secs > 0 {
		t := time.NewTimer(time.Duration(secs * float64(time.Second)))
		defer t.Stop()
		end = t.C
	}
	left := cmd.name == "blpop"
	for {
		var reply Reply
		err := e.node.Update(ctx, keys, func(tx *server.Tx) error {
			reply = nil
			d := e.newDB(tx, s)
			for _, k := range keys {
				el := d.get(k)
				if el == nil {
					return d.err
				}
				if el.exists && el.kind != fsm.KindList {
					reply = errWrongType
					return nil
				}
				if !el.exists {
					continue
				}
				var v string
				if left {
					v, el.l.items = el.l.items[0], el.l.items[1:]
				} else {
					n := len(el.l.items) - 1
					v, el.l.items = el.l.items[n], el.l.items[:n]
				}
				d.mutated(el)
				reply = Array{Bulk(k), Bulk(v)}
				return d.flush()
			}
			return nil
		})
		switch {
		case err != nil:
			return nil, err
		case reply != nil:
			return reply, nil
		}
		select {
		case <-ctx.Done():
			return NilArray{}, nil
		case <-end:
			return NilArray{}, nil
		case <-time.After(blockPoll):
		}
	}
}
