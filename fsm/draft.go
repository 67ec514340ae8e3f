package fsm

import (
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/tidwall/match"
)

// ErrRegrant means a transaction would grant a key it already granted: its
// grants share one token, so each key may be granted by it only once.
var ErrRegrant = errors.New("fsm: a transaction grants each key at most once")

// Draft works out a transaction on private copies of the keys it touches, so
// that the leader knows the outcome of every command before it proposes
// them. The same code applies the commands to the copies as will apply them
// to the table, so if every guard (what the draft read) still holds when the
// entry is applied, every outcome is the one the draft saw.
//
// A Draft is used by one goroutine. The table may change while it is used:
// that is what the guards catch.
type Draft struct {
	src     *Table
	t       *Table // copies of the keys read
	guards  map[string]Guard
	scans   map[string]Scan
	cmds    []Command
	results []*Result
	slab    []Result // where results are made
	granted map[string]bool
	pos     uint64
	// stale: a later listing of a pattern named other keys than the
	// first, so no one position held everything the draft read.
	stale bool
}

// Draft starts a transaction over t. Release gives it back when done.
func (t *Table) Draft() *Draft {
	d, _ := draftPool.Get().(*Draft)
	if d == nil {
		// The copies need only leases and the releases the draft adds (it
		// reads the rest of the memory through memBase): a draft applies no
		// member entry and forgets nothing.
		copies := &Table{locks: make(map[string]*Lease), mem: make(map[string][]released), memPerKey: ReleaseMemoryPerKey}
		d = &Draft{t: copies, guards: make(map[string]Guard)}
	}
	d.src, d.pos = t, t.Position()+1
	d.t.memBase = t
	return d
}

// draftPool keeps the maps of ended drafts for new ones: most transactions
// touch a key or two, and making the maps anew was a good part of their
// cost.
var draftPool sync.Pool

// draftPoolMaxKeys bounds the drafts kept: a draft that read more keys than
// this is dropped rather than keep its large maps.
const draftPoolMaxKeys = 64

// newResult returns a zero result from the draft's slab. (A slab that
// grows leaves the results made so far where they are.)
func (d *Draft) newResult() *Result {
	if len(d.slab) == cap(d.slab) {
		d.slab = make([]Result, 0, max(4, 2*cap(d.slab)))
	}
	d.slab = d.slab[:len(d.slab)+1]
	return &d.slab[len(d.slab)-1]
}

// Release ends the draft, which must not be used again, nor anything it
// returned by reference: its results and the commands of its Txn are
// reused by the next draft. (Leases it returned are values.)
func (d *Draft) Release() {
	if len(d.guards) > draftPoolMaxKeys || len(d.scans) > draftPoolMaxKeys || len(d.cmds) > draftPoolMaxKeys {
		*d = Draft{}
		return
	}
	clear(d.cmds)
	clear(d.results)
	clear(d.slab[:cap(d.slab)])
	clear(d.t.locks)
	clear(d.t.mem)
	clear(d.guards)
	clear(d.granted)
	clear(d.scans)
	*d.t = Table{locks: d.t.locks, mem: d.t.mem, memQueue: d.t.memQueue[:0], memPerKey: ReleaseMemoryPerKey}
	*d = Draft{t: d.t, guards: d.guards, granted: d.granted, scans: d.scans,
		cmds: d.cmds[:0], results: d.results[:0], slab: d.slab[:0]}
	draftPool.Put(d)
}

// Position is the position the draft applies its commands at: the lowest
// the transaction can have. A lease the draft granted or renewed has it as
// its version; its real token and version are known only once committed.
func (d *Draft) Position() uint64 { return d.pos }

// Read reports whether the draft has read key (loaded it as a guard).
func (d *Draft) Read(key string) bool {
	_, ok := d.guards[key]
	return ok
}

// Keys calls fn for every key the draft has read, in no particular order.
func (d *Draft) Keys(fn func(key string)) {
	for k := range d.guards {
		fn(k)
	}
}

// load copies key from the table, once, and records it as a guard.
func (d *Draft) load(key string) {
	if _, ok := d.guards[key]; ok {
		return
	}
	d.src.mu.RLock()
	g := d.src.guard(key)
	l := d.src.locks[key]
	d.src.mu.RUnlock()
	if l != nil {
		cp := l.copy() // a shared key's holders too: the draft applies to its own
		d.t.locks[key] = &cp
	}
	d.guards[key] = g
}

// Get returns key's lease as the draft has it.
func (d *Draft) Get(key string) (Lease, bool) {
	d.load(key)
	l, ok := d.t.locks[key]
	if !ok {
		return Lease{}, false
	}
	return l.copy(), true
}

// Remembered reports whether owner's release of key is in the draft's
// memory (the table's, and the draft's own releases).
func (d *Draft) Remembered(key, owner string) bool {
	d.load(key)
	return d.t.remembered(key, owner)
}

// Refuses reports whether the draft's memory refuses an acquire of key by
// owner (Table.Refuses).
func (d *Draft) Refuses(key, owner string) bool {
	d.load(key)
	return d.t.refuses(key, owner)
}

// Scan lists the table's keys matching pattern (a Redis glob), whatever
// their TTLs and before the draft's own commands, and records the listing:
// the transaction applies only if the same keys match when it is applied.
// Every listing counts: one of a pattern listed before that names other
// keys makes the draft stale (Current), since the table then held both
// listings at no one position. Scan guards names only; the caller loads
// each key it decides on (Get) so that the key's state is guarded too.
func (d *Draft) Scan(pattern string) []string {
	d.src.mu.RLock()
	sc := Scan{Pattern: pattern}
	var keys []string
	for k := range d.src.locks {
		if match.Match(k, pattern) {
			keys = append(keys, k)
			sc.Count++
			sc.Digest ^= keyDigest(k)
		}
	}
	d.src.mu.RUnlock()
	if d.scans == nil {
		d.scans = make(map[string]Scan)
	}
	if first, had := d.scans[pattern]; !had {
		d.scans[pattern] = sc
	} else if first != sc {
		d.stale = true
	}
	return keys
}

// Current reports whether what the draft read is what the table holds now:
// every key it read still has what it had (its guard holds), every listing
// still names the same keys, and no two listings of a pattern differed.
// Then everything it read is the table's state at one position, the
// current one, however many moments it was read at. A transaction that
// writes nothing answers only if its draft is current; one that writes is
// checked the same way when its entry applies (Txn).
func (d *Draft) Current() bool {
	if d.stale {
		return false
	}
	d.src.mu.RLock()
	defer d.src.mu.RUnlock()
	for k, g := range d.guards {
		if d.src.guard(k) != g {
			return false
		}
	}
	for p, sc := range d.scans {
		if d.src.scan(p) != sc {
			return false
		}
	}
	return true
}

// Stale reports whether two listings of one pattern named different keys:
// the draft's entry must not be proposed, as its guards would hold only
// for the first listing.
func (d *Draft) Stale() bool { return d.stale }

// Apply applies c (a plain command: not a member entry, a transaction or a
// command that names a session) to the draft and adds it to the transaction. It fails with ErrRegrant if c
// would grant a key the transaction granted already; the draft must then be
// dropped.
func (d *Draft) Apply(c Command) (*Result, error) {
	if c.Op == OpMember || c.Op == OpClusterID || c.Op == OpFormat || c.Op == OpTxn || c.Op.IsSession() || c.hasSessionPart() {
		return nil, ErrBadEntry
	}
	d.load(c.Key)
	d.cmds = append(d.cmds, c)
	r := d.newResult()
	d.t.applyInto(r, d.pos, &d.cmds[len(d.cmds)-1])
	if r.Code == Granted || r.Waiter == WaiterGranted {
		if d.granted[c.Key] {
			return nil, ErrRegrant
		}
		if d.granted == nil {
			d.granted = make(map[string]bool)
		}
		d.granted[c.Key] = true
	}
	d.results = append(d.results, r)
	return r, nil
}

// Commands returns the commands applied so far, in order.
func (d *Draft) Commands() []Command { return d.cmds }

// Txn returns the transaction: every key read as a guard, and the commands.
// It reports false if no command was applied.
func (d *Draft) Txn() (Command, bool) {
	if len(d.cmds) == 0 {
		return Command{}, false
	}
	// The usual transaction reads a key or two: one allocation.
	one := &struct {
		t Txn
		g [2]Guard
	}{}
	txn := &one.t
	txn.Cmds = d.cmds
	guards := one.g[:0]
	if len(d.guards) > len(one.g) {
		guards = make([]Guard, 0, len(d.guards))
	}
	for _, g := range d.guards {
		guards = append(guards, g)
	}
	slices.SortFunc(guards, func(a, b Guard) int { return strings.Compare(a.Key, b.Key) })
	var scans []Scan
	for _, sc := range d.scans {
		scans = append(scans, sc)
	}
	slices.SortFunc(scans, func(a, b Scan) int { return strings.Compare(a.Pattern, b.Pattern) })
	txn.Guards, txn.Scans = guards, scans
	return Command{Op: OpTxn, Txn: txn}, true
}

// Same reports whether an applied transaction's outcomes are the ones the
// draft saw (codes and waiter outcomes), as they are whenever its guards held.
func (d *Draft) Same(r *Result) bool {
	if r == nil || r.Code != Applied || len(r.Sub) != len(d.results) {
		return false
	}
	for i, s := range r.Sub {
		if s.Code != d.results[i].Code || s.Waiter != d.results[i].Waiter {
			return false
		}
	}
	return true
}
