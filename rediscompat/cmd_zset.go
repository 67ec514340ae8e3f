package rediscompat

import (
	"math"
	"strings"

	"github.com/fencerlock/fencer/fsm"
)

func init() {
	register(
		&command{name: "zadd", arity: -4, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Adds members to a sorted set, or updates their scores.", run: cmdZadd},
		&command{name: "zincrby", arity: 4, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Increments a member's score.", run: cmdZincrby},
		&command{name: "zrem", arity: -3, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Removes members from a sorted set.", run: ofKey(fsm.KindZSet, zero, cmdZrem)},
		&command{name: "zscore", arity: 3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns a member's score.", run: ofKey(fsm.KindZSet, Nil{}, cmdZscore)},
		&command{name: "zmscore", arity: -3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns members' scores.", run: cmdZmscore},
		&command{name: "zcard", arity: 2, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns the number of members.", run: ofKey(fsm.KindZSet, zero, cmdZcard)},
		&command{name: "zcount", arity: 4, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Counts the members with scores in a range.", run: ofRange(parseScoreRange, fsm.KindZSet, zero, cmdZcount)},
		&command{name: "zrank", arity: -3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns a member's rank by ascending score.", run: func(c *call) Reply { return zrank(c, false) }},
		&command{name: "zrevrank", arity: -3, flags: fReadOnly | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns a member's rank by descending score.", run: func(c *call) Reply { return zrank(c, true) }},
		&command{name: "zrange", arity: -4, flags: fReadOnly, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns members in a range of ranks or scores.", run: cmdZrange},
		&command{name: "zrevrange", arity: -4, flags: fReadOnly, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns members in a range of ranks, highest score first.", run: func(c *call) Reply { return zrangeGeneric(c, false, true, false) }},
		&command{name: "zrangebyscore", arity: -4, flags: fReadOnly, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns members with scores in a range.", run: func(c *call) Reply { return zrangeGeneric(c, true, false, true) }},
		&command{name: "zrevrangebyscore", arity: -4, flags: fReadOnly, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Returns members with scores in a range, highest first.", run: func(c *call) Reply { return zrangeGeneric(c, true, true, true) }},
		&command{name: "zremrangebyscore", arity: 4, flags: fWrite, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Removes the members with scores in a range.", run: ofRange(parseScoreRange, fsm.KindZSet, zero, cmdZremrangebyscore)},
		&command{name: "zremrangebyrank", arity: 4, flags: fWrite, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Removes the members in a range of ranks.", run: ofRange(parseIntPair, fsm.KindZSet, zero, cmdZremrangebyrank)},
		&command{name: "zpopmin", arity: -2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Removes and returns the members with the lowest scores.", run: func(c *call) Reply { return zpop(c, false) }},
		&command{name: "zpopmax", arity: -2, flags: fWrite | fFast, first: 1, last: 1, step: 1, group: "sorted-set", summary: "Removes and returns the members with the highest scores.", run: func(c *call) Reply { return zpop(c, true) }},
	)
}

func (c *call) zsetOf(key string) (*entry, Reply) { return c.getKind(key, fsm.KindZSet) }

// scoreReply answers a score: a bulk string in RESP2, a double in RESP3.
func (c *call) scoreReply(f float64) Reply {
	if c.resp3 {
		return Double(f)
	}
	return Bulk(formatFloat(f))
}

func cmdZadd(c *call) Reply {
	var o conditions
	var ch, incr bool
	i := 2
	for ; i < len(c.args); i++ {
		if o.parse(c.args[i]) {
			continue
		}
		switch strings.ToUpper(c.arg(i)) {
		case "CH":
			ch = true
		case "INCR":
			incr = true
		default:
			goto pairs
		}
	}
pairs:
	rest := c.args[i:]
	if len(rest) == 0 || len(rest)%2 != 0 {
		return errSyntax
	}
	if o.nx && o.xx {
		return Error("ERR XX and NX options at the same time are not compatible")
	}
	if o.gt && o.lt || o.nx && (o.gt || o.lt) {
		return Error("ERR GT, LT, and/or NX options at the same time are not compatible")
	}
	if incr && len(rest) > 2 {
		return Error("ERR INCR option supports a single increment-element pair")
	}
	scores := make([]float64, len(rest)/2)
	for j := range scores {
		f, ok := parseFloat(rest[2*j])
		if !ok {
			return errNotFloat
		}
		scores[j] = f
	}
	e, bad := c.zsetOf(c.arg(1))
	if bad != nil {
		return bad
	}
	if !e.exists {
		if o.xx {
			if incr {
				return Nil{}
			}
			return zero
		}
		c.d.create(e, fsm.KindZSet)
	}
	added, changed := 0, 0
	var result Reply = Nil{}
	for j, score := range scores {
		m := string(rest[2*j+1])
		cur, has := e.z.score(m)
		if incr {
			if has {
				score += cur
			}
			if math.IsNaN(score) {
				c.d.mutated(e)
				return Error("ERR resulting score is not a number (NaN)")
			}
		}
		switch {
		case has && o.nx, !has && o.xx:
			continue
		case has && (o.gt && score <= cur || o.lt && score >= cur):
			continue
		}
		if !has {
			added++
		} else if score != cur {
			changed++
		}
		e.z.add(m, score)
		if incr {
			result = c.scoreReply(score)
		}
	}
	c.d.mutated(e)
	if incr {
		return result
	}
	if ch {
		return Int(added + changed)
	}
	return Int(added)
}

func cmdZincrby(c *call) Reply {
	by, ok := parseFloat(c.args[2])
	if !ok {
		return errNotFloat
	}
	e, bad := c.zsetOf(c.arg(1))
	if bad != nil {
		return bad
	}
	if !e.exists {
		c.d.create(e, fsm.KindZSet)
	}
	cur, _ := e.z.score(c.arg(3))
	cur += by
	if math.IsNaN(cur) {
		c.d.mutated(e)
		return Error("ERR resulting score is not a number (NaN)")
	}
	e.z.add(c.arg(3), cur)
	c.d.mutated(e)
	return c.scoreReply(cur)
}

func cmdZrem(c *call, e *entry) Reply {
	return c.removeEach(e, e.z.remove)
}

func cmdZscore(c *call, e *entry) Reply {
	s, has := e.z.score(c.arg(2))
	if !has {
		return Nil{}
	}
	return c.scoreReply(s)
}

func cmdZmscore(c *call) Reply {
	e, bad := c.zsetOf(c.arg(1))
	if bad != nil {
		return bad
	}
	out := make(Array, 0, len(c.args)-2)
	for _, m := range c.args[2:] {
		if !e.exists {
			out = append(out, Nil{})
			continue
		}
		if s, has := e.z.score(string(m)); has {
			out = append(out, c.scoreReply(s))
		} else {
			out = append(out, Nil{})
		}
	}
	return out
}

func cmdZcard(c *call, e *entry) Reply {
	return Int(e.z.len())
}

// scoreBound is one end of a score range: "(5" is exclusive.
type scoreBound struct {
	v    float64
	excl bool
}

func parseBound(b []byte) (scoreBound, bool) {
	s := string(b)
	excl := strings.HasPrefix(s, "(")
	if excl {
		s = s[1:]
	}
	f, ok := parseFloat([]byte(s))
	return scoreBound{f, excl}, ok
}

// parseScoreRange parses the min and max of a range of scores.
func parseScoreRange(a, b []byte) (lo, hi scoreBound, bad Reply) {
	lo, ok1 := parseBound(a)
	hi, ok2 := parseBound(b)
	if !ok1 || !ok2 {
		return lo, hi, errMinMaxFloat
	}
	return lo, hi, nil
}

func (lo scoreBound) below(f float64) bool { // lo <= f (or < if exclusive)
	if lo.excl {
		return lo.v < f
	}
	return lo.v <= f
}

func (hi scoreBound) above(f float64) bool { // f <= hi
	if hi.excl {
		return f < hi.v
	}
	return f <= hi.v
}

// inScores returns the members of z with scores from lo to hi, in order.
func (z *zset) inScores(lo, hi scoreBound) []zmember {
	var in []zmember
	for _, m := range z.members {
		if lo.below(m.score) && hi.above(m.score) {
			in = append(in, m)
		}
	}
	return in
}

func cmdZcount(c *call, e *entry, lo, hi scoreBound) Reply {
	return Int(len(e.z.inScores(lo, hi)))
}

func zrank(c *call, rev bool) Reply {
	withScore := false
	if len(c.args) == 4 && strings.EqualFold(c.arg(3), "WITHSCORE") {
		withScore = true
	} else if len(c.args) != 3 {
		return errSyntax
	}
	e, bad := c.existing(fsm.KindZSet, null(withScore))
	if e == nil {
		return bad
	}
	r, has := e.z.rank(c.arg(2))
	if !has {
		return null(withScore)
	}
	if rev {
		r = e.z.len() - 1 - r
	}
	if withScore {
		s, _ := e.z.score(c.arg(2))
		return Array{Int(r), c.scoreReply(s)}
	}
	return Int(r)
}

// cmdZrange: ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count]
// [WITHSCORES].
func cmdZrange(c *call) Reply {
	byScore, rev := false, false
	for _, a := range c.args[4:] {
		switch strings.ToUpper(string(a)) {
		case "BYSCORE":
			byScore = true
		case "REV":
			rev = true
		case "BYLEX":
			return Error("ERR fencer does not support ZRANGE BYLEX")
		}
	}
	return zrangeGeneric(c, byScore, rev, false)
}

// zrangeGeneric serves ZRANGE and its older forms. byScoreArgs means the
// range arguments are scores and LIMIT/WITHSCORES follow (ZRANGEBYSCORE);
// for ZREVRANGEBYSCORE the first bound is the maximum. The key is the
// first argument.
func zrangeGeneric(c *call, byScore, rev, oldByScore bool) Reply {
	const keyIdx = 1
	withScores := false
	limit, offset, count := false, int64(0), int64(-1)
	for i := keyIdx + 3; i < len(c.args); i++ {
		switch strings.ToUpper(c.arg(i)) {
		case "WITHSCORES":
			withScores = true
		case "BYSCORE", "REV":
			if oldByScore {
				return errSyntax
			}
		case "LIMIT":
			if i+2 >= len(c.args) {
				return errSyntax
			}
			o, n, bad := parseIntPair(c.args[i+1], c.args[i+2])
			if bad != nil {
				return bad
			}
			limit, offset, count = true, o, n
			i += 2
		default:
			return errSyntax
		}
	}
	if limit && !byScore {
		return Error("ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	}
	a, b := c.args[keyIdx+1], c.args[keyIdx+2]
	var lo, hi scoreBound
	var start, stop int64
	var bad Reply
	if byScore {
		if rev {
			a, b = b, a
		}
		lo, hi, bad = parseScoreRange(a, b)
	} else {
		start, stop, bad = parseIntPair(a, b)
	}
	if bad != nil {
		return bad
	}
	e, bad := c.existing(fsm.KindZSet, Array{})
	if e == nil {
		return bad
	}
	var members []zmember
	if byScore {
		members = e.z.inScores(lo, hi)
		if rev {
			reverse(members)
		}
		if limit {
			if offset < 0 || offset >= int64(len(members)) {
				members = nil
			} else {
				members = members[offset:]
				if count >= 0 && count < int64(len(members)) {
					members = members[:count]
				}
			}
		}
	} else {
		all := e.z.members
		if rev {
			all = append([]zmember(nil), all...)
			reverse(all)
		}
		if from, to, ok := rangeIndexes(start, stop, len(all)); ok {
			members = all[from:to]
		}
	}
	out := Array{}
	for _, m := range members {
		if withScores && c.resp3 {
			out = append(out, Array{Bulk(m.name), Double(m.score)})
			continue
		}
		out = append(out, Bulk(m.name))
		if withScores {
			out = append(out, Bulk(formatFloat(m.score)))
		}
	}
	return out
}

func reverse(m []zmember) {
	for i, j := 0, len(m)-1; i < j; i, j = i+1, j-1 {
		m[i], m[j] = m[j], m[i]
	}
}

func cmdZremrangebyscore(c *call, e *entry, lo, hi scoreBound) Reply {
	return c.zremove(e, e.z.inScores(lo, hi))
}

func cmdZremrangebyrank(c *call, e *entry, start, stop int64) Reply {
	lo, hi, ok := rangeIndexes(start, stop, e.z.len())
	if !ok {
		return zero
	}
	return c.zremove(e, e.z.members[lo:hi])
}

// zremove removes ms, members of e, and answers how many. ms may be a part
// of e.z.members, which removing changes: the names are taken first.
func (c *call) zremove(e *entry, ms []zmember) Reply {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.name
	}
	for _, n := range names {
		e.z.remove(n)
	}
	if len(names) > 0 {
		c.d.mutated(e)
	}
	return Int(len(names))
}

func zpop(c *call, max bool) Reply {
	count, withCount, bad := c.popCount()
	if bad != nil {
		return bad
	}
	e, bad := c.zsetOf(c.arg(1))
	if bad != nil {
		return bad
	}
	out := Array{}
	if !e.exists {
		return out
	}
	for i := int64(0); i < count && e.z.len() > 0; i++ {
		m := e.z.members[0]
		if max {
			m = e.z.members[e.z.len()-1]
		}
		e.z.remove(m.name)
		if c.resp3 && withCount {
			out = append(out, Array{Bulk(m.name), Double(m.score)})
		} else {
			out = append(out, Bulk(m.name), c.scoreReply(m.score))
		}
	}
	c.d.mutated(e)
	return out
}

func init() {
	register(
		&command{name: "zinterstore", arity: -4, flags: fWrite, group: "sorted-set", summary: "Stores the intersection of sorted sets.", run: func(c *call) Reply { return zstore(c, true) }, keys: zstoreKeys},
		&command{name: "zunionstore", arity: -4, flags: fWrite, group: "sorted-set", summary: "Stores the union of sorted sets.", run: func(c *call) Reply { return zstore(c, false) }, keys: zstoreKeys},
	)
}

// zstoreKeys: the destination and numkeys sources.
func zstoreKeys(args [][]byte) []string {
	n, ok := parseInt(args[2])
	if !ok || n < 1 || int(n) > len(args)-3 {
		return []string{string(args[1])}
	}
	keys := []string{string(args[1])}
	for _, k := range args[3 : 3+n] {
		keys = append(keys, string(k))
	}
	return keys
}

// zstore: ZINTERSTORE|ZUNIONSTORE dst numkeys key... [WEIGHTS w...]
// [AGGREGATE SUM|MIN|MAX]. A set counts as a sorted set of score 1.
func zstore(c *call, inter bool) Reply {
	n, ok := parseInt(c.args[2])
	if !ok {
		return errNotInteger
	}
	if n < 1 {
		return Error("ERR at least 1 input key is needed for '" + strings.ToLower(c.arg(0)) + "' command")
	}
	if int(n) > len(c.args)-3 {
		return errSyntax
	}
	weights := make([]float64, n)
	for i := range weights {
		weights[i] = 1
	}
	agg := "sum"
	for i := 3 + int(n); i < len(c.args); i++ {
		switch strings.ToUpper(c.arg(i)) {
		case "WEIGHTS":
			if i+int(n) >= len(c.args) {
				return errSyntax
			}
			for j := range weights {
				w, ok := parseFloat(c.args[i+1+j])
				if !ok {
					return Error("ERR weight value is not a float")
				}
				weights[j] = w
			}
			i += int(n)
		case "AGGREGATE":
			if i+1 >= len(c.args) {
				return errSyntax
			}
			agg = strings.ToLower(c.arg(i + 1))
			if agg != "sum" && agg != "min" && agg != "max" {
				return errSyntax
			}
			i++
		default:
			return errSyntax
		}
	}
	var sets []map[string]float64
	for _, k := range c.args[3 : 3+n] {
		e := c.get(string(k))
		if e == nil {
			return errStore
		}
		m := map[string]float64{}
		switch {
		case !e.exists:
		case e.kind == fsm.KindZSet:
			for _, zm := range e.z.members {
				m[zm.name] = zm.score
			}
		case e.kind == fsm.KindSet:
			for _, sm := range e.set.members {
				m[sm] = 1
			}
		default:
			return errWrongType
		}
		sets = append(sets, m)
	}
	combine := func(a, b float64) float64 {
		switch agg {
		case "min":
			return math.Min(a, b)
		case "max":
			return math.Max(a, b)
		}
		r := a + b
		if math.IsNaN(r) {
			return 0
		}
		return r
	}
	out := map[string]float64{}
	for i, m := range sets {
		for name, score := range m {
			w := score * weights[i]
			if math.IsNaN(w) {
				w = 0
			}
			if inter {
				if i > 0 {
					continue
				}
				in := true
				acc := w
				for j := 1; j < len(sets); j++ {
					s2, has := sets[j][name]
					if !has {
						in = false
						break
					}
					w2 := s2 * weights[j]
					if math.IsNaN(w2) {
						w2 = 0
					}
					acc = combine(acc, w2)
				}
				if in {
					out[name] = acc
				}
				continue
			}
			if cur, has := out[name]; has {
				out[name] = combine(cur, w)
			} else {
				out[name] = w
			}
		}
	}
	dst := c.get(c.arg(1))
	if dst == nil {
		return errStore
	}
	if len(out) == 0 {
		if dst.exists {
			c.d.remove(dst)
		}
		return zero
	}
	c.d.create(dst, fsm.KindZSet)
	for name, score := range out {
		dst.z.add(name, score)
	}
	c.d.mutated(dst)
	return Int(len(out))
}
