package rediscompat

import (
	"context"
	"errors"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/fencerlock/fencer/server"
)

// Node is what this layer needs of a fencer node (*server.Node): one
// transaction, committed as one Raft entry (see server.Node.Update).
type Node interface {
	Update(ctx context.Context, keys []string, fn func(tx *server.Tx) error) error
}

// store is what a db needs of the node's transaction (*server.Tx).
type store interface {
	Get(key string) (server.Record, bool, error)
	Put(key string, kind fsm.Kind, value string, ttl time.Duration, keepTTL bool) error
	Del(key string) (bool, error)
	Remembered(key, owner string) (bool, error)
	Refuses(key, owner string) (bool, error)
	Release(key, owner string, redis bool) (bool, error)
	Keys(pattern string) []string
}

// ttlMode says what a write does to a key's TTL.
type ttlMode uint8

const (
	ttlKeep ttlMode = iota // the key keeps its TTL (none, if it is new)
	ttlSet                 // the key gets entry.ttl
	ttlNone                // the key has no TTL (PERSIST, SET without one)
)

// entry is one key as a command or script sees it: loaded from the store
// once, decoded, changed in place, and written back (flush) if dirty.
type entry struct {
	key    string
	exists bool
	kind   fsm.Kind
	str    string
	h      *hash
	z      *zset
	l      *list
	set    *set

	mode      ttlMode
	ttl       time.Duration // with ttlSet
	remaining time.Duration // as loaded; server.NoExpiry for none

	dirty      bool
	origExists bool
	origStr    string
	// readBy holds the value a GET of this string returned: with
	// --redlock-multi-endpoint a later DEL is then that value's release.
	readBy *string
	// ghost is the value whose release of this key is remembered, shown
	// to a multi-endpoint script that names it (see db.ghostGet);
	// ghostDone that the script then deleted the key, which completed
	// that value's release and did nothing.
	ghost     string
	ghostDone bool
}

// ErrReleased stops a command or script, under --redlock-multi-endpoint,
// that writes a string with the value whose release is the key's newest,
// or that does anything but delete a key after a ghost read of it (see
// db.ghostGet): a value that released a lock does not take it back while
// nobody took it since, and never acts on it after a ghost read. Nothing
// the command or script did takes effect. The bridge answers it with
// wire.Released.
var ErrReleased = errors.New("rediscompat: this value released the key; it cannot write it or act on it again (--redlock-multi-endpoint)")

// db is the keyspace as one command or script sees it. It reads through to
// the transaction once per key and writes every changed key back at the
// end (flush), so the transaction's entry holds one write per key.
type db struct {
	st      store
	entries []*entry          // loaded, in the order first used
	byKey   map[string]*entry // entries by key, once there are many
	order   []*entry          // dirty entries, in the order first written
	now     time.Time
	err     error // a limit or store error: the command or script stops, nothing is committed

	// multi is --redlock-multi-endpoint; argv the values a script was
	// given (for ghosts), argvOrder the same in ARGV's order.
	multi     bool
	argv      map[string]bool
	argvOrder []string
	// allowed checks a key against the user's key patterns; nil allows all.
	allowed func(key string) bool
	// pubs are the messages to publish once the entry commits.
	pubs []publication
}

type publication struct {
	shard            bool
	channel, message string
}

func newDB(st store, now time.Time) *db {
	return &db{st: st, now: now}
}

// dbIndexAt is how many entries a db looks through in order before it
// indexes them by key: most commands and scripts use a key or two.
const dbIndexAt = 8

// loaded returns key's entry if it was loaded.
func (d *db) loaded(key string) (*entry, bool) {
	if d.byKey != nil {
		e, ok := d.byKey[key]
		return e, ok
	}
	for _, e := range d.entries {
		if e.key == key {
			return e, true
		}
	}
	return nil, false
}

func (d *db) addEntry(e *entry) {
	d.entries = append(d.entries, e)
	switch {
	case d.byKey != nil:
		d.byKey[e.key] = e
	case len(d.entries) > dbIndexAt:
		d.byKey = make(map[string]*entry, 2*len(d.entries))
		for _, x := range d.entries {
			d.byKey[x.key] = x
		}
	}
}

// fail records a store error; the first one wins.
func (d *db) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// get returns key's entry, loading it on first use; nil if the store failed
// (d.err says why).
func (d *db) get(key string) *entry {
	if e, ok := d.loaded(key); ok {
		return e
	}
	if d.err != nil {
		return nil
	}
	rec, ok, err := d.st.Get(key)
	if err != nil {
		d.fail(err)
		return nil
	}
	e := &entry{key: key, exists: ok, origExists: ok, remaining: -2}
	if ok {
		e.kind = rec.Kind
		e.remaining = rec.Remaining
		switch rec.Kind {
		case fsm.KindString:
			e.str = rec.Value
			e.origStr = rec.Value
		case fsm.KindHash:
			e.h, err = decodeHash(rec.Value)
		case fsm.KindZSet:
			e.z, err = decodeZset(rec.Value)
		case fsm.KindList:
			e.l, err = decodeList(rec.Value)
		case fsm.KindSet:
			e.set, err = decodeSet(rec.Value)
		}
		if err != nil {
			d.fail(err)
			return nil
		}
	}
	d.addEntry(e)
	return e
}

// touch marks e written. A key a ghost read showed may only be deleted
// (cmdDel completes the release without a write): any other write stops
// the command or script.
func (d *db) touch(e *entry) {
	if e.ghost != "" {
		d.fail(ErrReleased)
		return
	}
	if !e.dirty {
		e.dirty = true
		d.order = append(d.order, e)
	}
}

// setString stores s in e as a string with the TTL mode given (ttlKeep:
// whatever e's TTL is now). Every string write passes here: under
// --redlock-multi-endpoint, writing the value whose release is the key's
// newest remembered one stops the command or script with ErrReleased (the
// commands that have a "not done" reply, SET NX and XX, SETNX and MSETNX,
// check refusedValue first and answer it instead).
func (d *db) setString(e *entry, s string, mode ttlMode, ttl time.Duration) {
	if d.refusedValue(e, s) {
		d.fail(ErrReleased)
		return
	}
	e.exists, e.kind, e.str = true, fsm.KindString, s
	e.h, e.z, e.l, e.set = nil, nil, nil, nil
	if mode != ttlKeep {
		e.mode, e.ttl = mode, ttl
	}
	d.touch(e)
}

// create makes e a new, empty key of kind (a hash, sorted set or list).
func (d *db) create(e *entry, kind fsm.Kind) {
	e.exists, e.kind, e.str = true, kind, ""
	e.h, e.z, e.l, e.set = nil, nil, nil, nil
	switch kind {
	case fsm.KindHash:
		e.h = newHash()
	case fsm.KindZSet:
		e.z = newZset()
	case fsm.KindList:
		e.l = &list{}
	case fsm.KindSet:
		e.set = newSet()
	}
	e.mode = ttlNone
	d.touch(e)
}

// remove deletes e; a key created again after has no TTL.
func (d *db) remove(e *entry) {
	e.exists = false
	e.str, e.h, e.z, e.l, e.set = "", nil, nil, nil, nil
	e.mode = ttlNone
	d.touch(e)
}

// setTTL gives e a TTL, or none (ttl < 0).
func (d *db) setTTL(e *entry, ttl time.Duration) {
	if ttl < 0 {
		e.mode = ttlNone
	} else {
		e.mode, e.ttl = ttlSet, ttl
	}
	d.touch(e)
}

// pttl returns e's remaining TTL as PTTL has it: -2 absent, -1 none.
func (e *entry) pttl() time.Duration {
	switch {
	case !e.exists:
		return -2
	case e.mode == ttlNone:
		return -1
	case e.mode == ttlSet:
		return e.ttl
	case e.remaining == server.NoExpiry || e.remaining < 0:
		return -1
	}
	return e.remaining
}

// mutated is called after a change to an aggregate: an empty one is
// deleted, as Redis does.
func (d *db) mutated(e *entry) {
	empty := e.h != nil && e.h.len() == 0 || e.z != nil && e.z.len() == 0 || e.l != nil && len(e.l.items) == 0 ||
		e.set != nil && e.set.len() == 0
	if empty {
		d.remove(e)
		return
	}
	d.touch(e)
}

// flush writes every changed key to the transaction.
func (d *db) flush() error {
	if d.err != nil {
		return d.err
	}
	for _, e := range d.order {
		if err := d.write(e); err != nil {
			return err
		}
	}
	return nil
}

func (d *db) write(e *entry) error {
	if !e.exists {
		if !e.origExists {
			return nil
		}
		if d.multi && e.readBy != nil && *e.readBy == e.origStr && e.kind == fsm.KindString {
			// A compare-then-delete by a value: that value's release,
			// remembered, as FENCE.RELEASE's.
			_, err := d.st.Release(e.key, e.origStr, false)
			return err
		}
		_, err := d.st.Del(e.key)
		return err
	}
	var value string
	switch e.kind {
	case fsm.KindString:
		value = e.str
	case fsm.KindHash:
		value = e.h.encode()
	case fsm.KindZSet:
		value = e.z.encode()
	case fsm.KindList:
		value = e.l.encode()
	case fsm.KindSet:
		value = e.set.encode()
	}
	switch e.mode {
	case ttlSet:
		return d.st.Put(e.key, e.kind, value, max(e.ttl, time.Millisecond), false)
	case ttlNone:
		return d.st.Put(e.key, e.kind, value, 0, false)
	}
	return d.st.Put(e.key, e.kind, value, 0, true)
}

// ghostGet is GET in a script under --redlock-multi-endpoint: a key that
// no value the script was given holds, and whose release by one of them
// (the first in ARGV's order) is remembered, reads as held by that value, so
// that a Redlock client's repeated release through another node (GET,
// compare, DEL) succeeds as a repeated FENCE.RELEASE does, whoever took the
// key since; its DEL then changes nothing. A ghost read may only complete a
// release: a script that does anything else with the key (a write, an
// extend, a read of its TTL), or ends without deleting it, stops with
// ErrReleased (see ghostUse, ghostsDone).
func (d *db) ghostGet(e *entry) (string, bool) {
	if !d.multi || d.argv == nil {
		return "", false
	}
	if e.ghost != "" {
		if e.ghostDone {
			return "", false
		}
		return e.ghost, true
	}
	if e.dirty || e.exists && e.kind == fsm.KindString && d.argv[e.str] {
		return "", false
	}
	for _, v := range d.argvOrder {
		ok, err := d.st.Remembered(e.key, v)
		if err != nil {
			d.fail(err)
			return "", false
		}
		if ok {
			e.ghost = v
			return v, true
		}
	}
	return "", false
}

// ghostUse stops a script's command that names a key a ghost read showed,
// unless it is DEL or UNLINK (the release the read is for) or another GET.
func (d *db) ghostUse(cmd string, keys []string) {
	if cmd == "del" || cmd == "unlink" || cmd == "get" {
		return
	}
	for _, k := range keys {
		if e, ok := d.loaded(k); ok && e.ghost != "" {
			d.fail(ErrReleased)
			return
		}
	}
}

// ghostsDone stops a script that ends with a ghost read it did not complete
// by deleting the key: what it answers would rest on a value that holds
// nothing.
func (d *db) ghostsDone() {
	for _, e := range d.entries {
		if e.ghost != "" && !e.ghostDone {
			d.fail(ErrReleased)
			return
		}
	}
}

// ownValue reports whether, under --redlock-multi-endpoint, a script's key is
// a string that holds one of the values the script was given: EXISTS then
// reads it as absent, so that a Redlock client's acquire that checks EXISTS
// before it sets each key (node-redlock's), repeated by the value that holds
// the keys (through another node), renews them rather than fails.
func (d *db) ownValue(e *entry) bool {
	return d.multi && d.argv != nil && e.exists && e.kind == fsm.KindString && d.argv[e.str]
}

// refusedValue reports whether writing value v to e is refused under
// --redlock-multi-endpoint: the release memory refuses v's acquire (v's
// release is the key's newest remembered one, or v gave the key up with
// FENCE.RELEASE and nobody took it since), so a delayed acquire or extend
// by v cannot bring the released lock back (as FENCE.ACQUIRE is refused;
// an older release's owner may write the key again, as its next attempt
// may: someone else took it since).
func (d *db) refusedValue(e *entry, v string) bool {
	if !d.multi || e.exists && e.kind == fsm.KindString && e.str == v {
		return false
	}
	refused, err := d.st.Refuses(e.key, v)
	if err != nil {
		d.fail(err)
		return true
	}
	return refused
}
