package rediscompat

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// flags of a command.
type flags uint16

const (
	fWrite     flags = 1 << iota // changes the keyspace
	fReadOnly                    // reads it only
	fNoScript                    // not callable from a script
	fNoTxn                       // needs no transaction (no keys): TIME, PUBLISH
	fFast                        // O(1): reported by COMMAND
	fMovableKy                   // keys found by the command itself (EVAL)
	fBlocking                    // may wait for its keys (BLPOP): run by blockingPop
)

// command is one Redis command: arity and key positions as Redis's COMMAND
// reports them (arity counts the name; negative is a minimum).
type command struct {
	name              string
	arity             int
	flags             flags
	first, last, step int
	group, summary    string
	run               func(c *call) Reply
	// keys finds the keys of a command whose key positions move
	// (ZINTERSTORE's count, EVAL's), in place of first, last and step.
	keys func(args [][]byte) []string
}

// call is one run of a command: from a client directly, or from a script.
type call struct {
	d      *db
	args   [][]byte // args[0] is the name as sent
	e      *Engine
	script bool // called by redis.call/pcall
	// resp3 asks for RESP3 reply types (maps, doubles): a client after
	// HELLO 3, or a script after redis.setresp(3).
	resp3 bool
}

func (c *call) arg(i int) string { return string(c.args[i]) }

// keysOf returns the keys of a command's arguments by its key positions.
func (cmd *command) keysOf(args [][]byte) []string {
	if cmd.keys != nil {
		return cmd.keys(args)
	}
	if cmd.first == 0 {
		return nil
	}
	last := cmd.last
	if last < 0 {
		last = len(args) + last
	}
	var keys []string
	for i := cmd.first; i <= last && i < len(args); i += cmd.step {
		keys = append(keys, string(args[i]))
	}
	return keys
}

// arityOK checks n arguments (the name included) against cmd's arity.
func (cmd *command) arityOK(n int) bool {
	if cmd.arity < 0 {
		return n >= -cmd.arity
	}
	return n == cmd.arity
}

// commands is every command the layer runs, by lower-case name;
// upperCommands the same by upper-case name, as many clients send them.
var commands, upperCommands = map[string]*command{}, map[string]*command{}

func register(cs ...*command) {
	for _, c := range cs {
		commands[c.name] = c
		upperCommands[strings.ToUpper(c.name)] = c
	}
}

// lookup returns the command named name (any case), or nil.
func lookup(name []byte) *command {
	if c, ok := commands[string(name)]; ok {
		return c
	}
	if c, ok := upperCommands[string(name)]; ok {
		return c
	}
	return commands[strings.ToLower(string(name))]
}

// parseInt parses a Redis integer argument.
func parseInt(b []byte) (int64, bool) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	return v, err == nil
}

// parseIntPair parses two Redis integer arguments, such as a range's start
// and stop.
func parseIntPair(a, b []byte) (int64, int64, Reply) {
	x, ok1 := parseInt(a)
	y, ok2 := parseInt(b)
	if !ok1 || !ok2 {
		return 0, 0, errNotInteger
	}
	return x, y, nil
}

// conditions are the NX, XX, GT and LT options of EXPIRE and ZADD.
type conditions struct{ nx, xx, gt, lt bool }

// parse sets the option a names and reports whether it is one of them.
func (o *conditions) parse(a []byte) bool {
	switch strings.ToUpper(string(a)) {
	case "NX":
		o.nx = true
	case "XX":
		o.xx = true
	case "GT":
		o.gt = true
	case "LT":
		o.lt = true
	default:
		return false
	}
	return true
}

// parseFloat parses a Redis float argument (inf, -inf and +inf included;
// NaN refused).
func parseFloat(b []byte) (float64, bool) {
	s := string(b)
	switch strings.ToLower(s) {
	case "inf", "+inf", "infinity", "+infinity":
		return math.Inf(1), true
	case "-inf", "-infinity":
		return math.Inf(-1), true
	}
	if s == "" || strings.TrimSpace(s) != s {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// expiry is a parsed relative or absolute expire time.
type expiry struct {
	set bool
	ttl time.Duration // relative to now; may be zero or negative (already expired)
}

// maxKeyTTL is the longest TTL fencer keeps: a key given a longer one (a
// lock "forever": 1000 years) keeps this one, a listed difference (its
// deadline is timed in nanoseconds).
const maxKeyTTL = 100 * 365 * 24 * time.Hour

// parseExpiry turns the argument of EX, PX, EXAT, PXAT (or of EXPIRE and its
// kin) into a TTL from now, with the leader's wall clock for the absolute
// forms. It fails as Redis does: not an integer, or an expire time that
// overflows a millisecond count once made absolute. A TTL beyond maxKeyTTL
// is kept as maxKeyTTL.
func (c *call) parseExpiry(arg []byte, unit time.Duration, absolute bool) (expiry, bool) {
	v, ok := parseInt(arg)
	if !ok {
		return expiry{}, false
	}
	per := int64(unit / time.Millisecond)
	if v > math.MaxInt64/per || v < math.MinInt64/per {
		return expiry{}, false
	}
	msv := v * per
	nowMS := c.d.now.UnixMilli()
	if absolute {
		msv -= nowMS
	} else if msv > math.MaxInt64-nowMS {
		return expiry{}, false
	}
	d := time.Duration(msv) * time.Millisecond
	if msv > int64(maxKeyTTL/time.Millisecond) {
		d = maxKeyTTL
	}
	return expiry{set: true, ttl: d}, true
}

// positiveExpiry parses the expire time of SET, SETEX, PSETEX and GETEX:
// an integer, positive, that does not overflow; bad is Redis's error.
func (c *call) positiveExpiry(arg []byte, unit time.Duration, absolute bool, cmd string) (expiry, Reply) {
	v, ok := parseInt(arg)
	if !ok {
		return expiry{}, errNotInteger
	}
	exp, ok := c.parseExpiry(arg, unit, absolute)
	if v <= 0 || !ok {
		return expiry{}, Error("ERR invalid expire time in '" + cmd + "' command")
	}
	return exp, nil
}

// get loads key; nil if the store failed.
func (c *call) get(key string) *entry { return c.d.get(key) }

// getKind loads key and checks it is absent or of kind; it returns the
// entry, and the WRONGTYPE error otherwise.
func (c *call) getKind(key string, kind fsm.Kind) (*entry, Reply) {
	e := c.d.get(key)
	if e == nil {
		return nil, errStore
	}
	if e.exists && e.kind != kind {
		return nil, errWrongType
	}
	return e, nil
}

// existing loads the command's key (its first argument) and returns it if
// it exists and is of kind. Otherwise it returns nil and the reply: missing
// if the key does not exist, WRONGTYPE or the store's error if it cannot be
// used.
func (c *call) existing(kind fsm.Kind, missing Reply) (*entry, Reply) {
	e, bad := c.getKind(c.arg(1), kind)
	switch {
	case bad != nil:
		return nil, bad
	case !e.exists:
		return nil, missing
	}
	return e, nil
}

// ofKey makes the run of a command that needs its key's value first: fn
// is given the key's entry if it exists and is of kind; else the command
// answers as existing does.
func ofKey(kind fsm.Kind, missing Reply, fn func(c *call, e *entry) Reply) func(*call) Reply {
	return func(c *call) Reply {
		e, r := c.existing(kind, missing)
		if e == nil {
			return r
		}
		return fn(c, e)
	}
}

// ofRange makes the run of a command "KEY a b" whose a and b bound a range
// (LRANGE, ZCOUNT and their kin): it parses them with parse first, then
// gives fn the key's entry as ofKey does.
func ofRange[T any](parse func(a, b []byte) (T, T, Reply), kind fsm.Kind, missing Reply, fn func(c *call, e *entry, lo, hi T) Reply) func(*call) Reply {
	return func(c *call) Reply {
		lo, hi, bad := parse(c.args[2], c.args[3])
		if bad != nil {
			return bad
		}
		e, r := c.existing(kind, missing)
		if e == nil {
			return r
		}
		return fn(c, e, lo, hi)
	}
}

// removeEach removes each of the command's arguments from the third on with
// remove (a member of e's value) and answers how many it removed (HDEL,
// SREM, ZREM).
func (c *call) removeEach(e *entry, remove func(string) bool) Reply {
	n := 0
	for _, m := range c.args[2:] {
		if remove(string(m)) {
			n++
		}
	}
	if n > 0 {
		c.d.mutated(e)
	}
	return Int(n)
}

// errStore answers a command whose store failed; the error itself (c.d.err)
// stops the command or script with nothing committed.
var errStore = Error("ERR fencer could not read or write the key")

// rangeIndexes turns Redis start and stop (negative from the end) into a
// half-open range over n elements.
func rangeIndexes(start, stop int64, n int) (int, int, bool) {
	ln := int64(n)
	if start < 0 {
		start += ln
	}
	if stop < 0 {
		stop += ln
	}
	if start < 0 {
		start = 0
	}
	if start > stop || start >= ln {
		return 0, 0, false
	}
	if stop >= ln {
		stop = ln - 1
	}
	return int(start), int(stop) + 1, true
}
