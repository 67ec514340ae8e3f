package fsm

import (
	"fmt"
	"sync"

	"github.com/tidwall/match"
)

// Release memory bounds. They are constants, not options, because every node
// must forget at the same log position.
const (
	// ReleaseMemoryWindow is how many log positions a release is remembered.
	ReleaseMemoryWindow = 1 << 20
	// ReleaseMemoryMax is how many keys have a remembered release at most;
	// past it the oldest release is forgotten first.
	ReleaseMemoryMax = 1 << 17
	// ReleaseMemoryPerKey is how many releases of one key, by as many
	// owners, are remembered at most: the newest; past it the key's oldest
	// is forgotten. A late release by an owner whose release of the key was
	// pushed out answers as for a key it does not hold.
	ReleaseMemoryPerKey = 8
)

// releaseMemoryWindow and releaseMemoryMax are the bounds New gives a table:
// the constants above, except in a binary built with -tags fencer_faults,
// where the soak lowers them through the environment, on every node alike
// (release_faults.go).
var (
	releaseMemoryWindow uint64 = ReleaseMemoryWindow
	releaseMemoryMax           = ReleaseMemoryMax
)

// Kind is the type of a key's value, as Redis has types.
type Kind uint8

// The kinds. Their numeric values are part of the log and snapshot formats.
const (
	// KindString: a string; a lock is a string whose value is its owner.
	KindString Kind = 0
	// KindHash, KindZSet, KindList and KindSet hold their value in
	// Lease.Data, in an encoding of the Redis-compatible layer's that the
	// table only stores.
	KindHash Kind = 1
	KindZSet Kind = 2
	KindList Kind = 3
	KindSet  Kind = 4
	// KindShared: a read-write lock or a semaphore, whose holders are in
	// Lease.Shared. Only shared acquires make one; a put cannot.
	KindShared Kind = 5
)

// HasToken reports whether keys of kind k get a fencing token: a string when
// it is created or its value changes, a hash when it is created.
func (k Kind) HasToken() bool { return k == KindString || k == KindHash }

func (k Kind) valid() bool { return k <= KindSet }

// Lease is the current record of a key: a lock's grant, or a Redis value
// with its TTL.
type Lease struct {
	// Owner is a string's value: the owner of a lock.
	Owner string
	Token uint64 // zero for kinds without tokens
	TTL   uint64 // milliseconds; zero: the key does not expire
	// Version is the position of the entry that last granted or renewed
	// the lease (started its TTL).
	Version uint64
	// Mod is the position of the entry that last wrote the key in any way:
	// what a transaction's guard compares.
	Mod  uint64
	Kind Kind
	// Data is the value of a key that is not a string, or the value of a
	// lock held under a session (an election's leader's value).
	Data string
	// Session is the session the lock is held under (zero: none). Such a
	// lock has no TTL of its own: it lives as long as its session.
	Session uint64
	// Deadline is node-local, not replicated state: the server records here
	// when it timed the lease to run out on its own clock (SetDeadline), so
	// that a million leases need no second map. Apply never reads it and
	// clears it when it grants or renews (0: not timed yet); snapshots and
	// the state hash leave it out.
	Deadline int64
	// Shared holds a shared key's holders (KindShared); nil otherwise.
	Shared *Shared
}

// Ref names the lease for an expire or revoke.
func (l Lease) Ref() LeaseRef { return LeaseRef{Token: l.Token, Version: l.Version} }

// Code is the business outcome of a command. Outcomes are values, not errors:
// "held by another owner" is a normal answer.
type Code uint8

// Outcomes.
const (
	// Granted: an acquire took a free key; Lease is the new grant.
	Granted Code = iota + 1
	// Renewed: an acquire by the holder; same token, lease renewed.
	Renewed
	// Held: an acquire found the key held by another owner.
	Held
	// Refused: an acquire by an owner whose release of the key is remembered.
	Refused
	// Extended: the holder's lease was renewed.
	Extended
	// NotHolder: an extend or release by an owner that does not hold the key.
	NotHolder
	// Released: the holder released the key.
	Released
	// AlreadyReleased: the owner's release of the key is remembered.
	AlreadyReleased
	// Expired: the named lease was freed.
	Expired
	// Revoked: the key was freed administratively.
	Revoked
	// Stale: the named lease is not the current one; nothing changed.
	Stale
	// Recorded: a membership entry was applied.
	Recorded
	// Applied: every guard of a transaction held and its commands were
	// applied; Result.Sub has their outcomes.
	Applied
	// Conflict: a guard of a transaction did not hold; nothing changed.
	Conflict
	// Written: a put stored its value (Result.Created if the key was new).
	Written
	// NoSession: the command named a session that is not open (it ended,
	// or never was); nothing changed.
	NoSession
	// Opened: a session was opened; its ID is Result.Position.
	Opened
	// Closed: a session was closed at its holder's request; Result.Sub
	// has the releases of its locks.
	Closed
	// Proclaimed: the holder set its lock's value.
	Proclaimed
	// Mismatch: a shared acquire found a key of another kind (a plain
	// lock or value, the other kind of shared lock, a semaphore with
	// another number of permits); nothing changed.
	Mismatch
	// Unreadable: an OpFormat named a level above FormatReadable; the
	// table is unchanged, and the node must stop (FormatError).
	Unreadable
)

var codeNames = [...]string{Granted: "granted", Renewed: "renewed", Held: "held",
	Refused: "refused", Extended: "extended", NotHolder: "not-holder",
	Released: "released", AlreadyReleased: "already-released", Expired: "expired",
	Revoked: "revoked", Stale: "stale", Recorded: "recorded", Applied: "applied", Conflict: "conflict", Written: "written",
	NoSession: "no-session", Opened: "opened", Closed: "closed", Proclaimed: "proclaimed", Mismatch: "mismatch", Unreadable: "unreadable"}

// String names the outcome.
func (c Code) String() string {
	if int(c) < len(codeNames) && codeNames[c] != "" {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", uint8(c))
}

// WaiterOutcome says what became of an entry's attached waiter.
type WaiterOutcome uint8

// Waiter outcomes.
const (
	// WaiterNone: no waiter, or the key was not free after the command.
	WaiterNone WaiterOutcome = iota
	// WaiterGranted: the waiter now holds the key; Result.Lease is its grant.
	WaiterGranted
	// WaiterRefused: the key was free but the waiter's release of it is
	// remembered, so it was not granted.
	WaiterRefused
	// WaiterNoSession: the key was free but the session the waiter
	// acquires under is no longer open, so it was not granted.
	WaiterNoSession
)

// Result is what Apply returns for every entry.
type Result struct {
	Position uint64   // the command's position: floor + index of its entry (+ its place in a batch)
	Cmd      *Command // the decoded command (not to be changed)
	Code     Code
	// Lease is the key's lease after the entry; Token is zero if it is free.
	Lease Lease
	// Freed is the lease this entry ended, if any.
	Freed *Lease
	// Waiter is what became of Cmd.Waiter.
	Waiter WaiterOutcome
	// Sub holds the outcomes of an applied transaction's commands, in
	// order (all at Position), or of the end of a session: one release,
	// expiry or revoke for each lock it held, in key order, each with a
	// command of its own (Cmd) naming the key, its owner and its waiter.
	Sub []*Result
	// Created reports that a put made a new key (or replaced one of
	// another kind, which Freed then names).
	Created bool
	// Taken is a renewed session's count of locks taken from it (see
	// Session.Taken).
	Taken uint64
	// Holder is, for a command on a shared key, the holder it granted,
	// renewed, downgraded or freed (or the waiter's hand-off granted).
	Holder *Holder
}

// released is a remembered release. Every owner's release of a key is
// remembered (the newest ReleaseMemoryPerKey of them), not only the last
// one, so that an owner's repeated release answers as done however many
// owners took and released the key in between (docs/safety.md, release
// memory). An acquire is refused only to the owner of the key's newest
// release, as when one release per key was remembered: a grant since the
// newest release is someone else's, so an older owner's acquire cannot be
// the delayed duplicate that brings back a lock nobody took after it, and
// it may be that owner's next attempt (a Redlock client retries with its
// value).
type released struct {
	owner string
	token uint64
	pos   uint64
}

// memRef is a release in the order it was remembered; it is stale once its
// owner released the key again, or it was forgotten.
type memRef struct {
	key, owner string
	pos        uint64
}

// Table is the lock table. It implements raft.FSM. Apply runs on Raft's FSM
// goroutine; the read methods may be called from any goroutine.
type Table struct {
	mu    sync.RWMutex
	locks map[string]*Lease
	// mem holds each key's remembered releases, oldest first, one per
	// owner, at most memPerKey; memCount how many in all; memQueue every
	// release in the order remembered (the order they are forgotten in).
	// memBase is set on a draft's copies only: the table whose memory they
	// read through (a draft copies no memory; it adds its own releases to
	// mem).
	mem      map[string][]released
	memCount int
	memQueue []memRef
	memBase  *Table
	members  map[string]string // node ID → client address, or RemovedMember
	// clusterID names the cluster (OpClusterID); empty until its first
	// leader running a version with IDs commits one.
	clusterID string
	// format is the cluster's format level (OpFormat; format.go).
	format uint64
	floor  uint64 // added to every index
	// extra is how many positions past its own the command being applied
	// took (the hand-offs of a session's end); the floor grows by it once
	// the command is applied.
	extra     uint64
	lastIndex uint64 // last applied Raft index
	maxToken  uint64 // largest token ever granted
	sessions  map[uint64]*Session

	memWindow uint64
	memMax    int
	memPerKey int
}

// New returns an empty table.
func New() *Table {
	return &Table{
		locks:     make(map[string]*Lease),
		mem:       make(map[string][]released),
		members:   make(map[string]string),
		sessions:  make(map[uint64]*Session),
		memWindow: releaseMemoryWindow,
		memMax:    releaseMemoryMax,
		memPerKey: ReleaseMemoryPerKey,
	}
}

// newToken issues pos as a token.
func (t *Table) newToken(pos uint64) uint64 {
	if pos < t.maxToken {
		panic(fmt.Sprintf("fsm: token %d would go below the largest issued %d", pos, t.maxToken))
	}
	t.maxToken = pos
	return pos
}

// scan lists the keys matching pattern (a Redis glob) as a transaction's
// scan names them: their count and a digest independent of their order.
// It reads the whole table.
func (t *Table) scan(pattern string) Scan {
	sc := Scan{Pattern: pattern}
	for k := range t.locks {
		if match.Match(k, pattern) {
			sc.Count++
			sc.Digest ^= keyDigest(k)
		}
	}
	return sc
}

// keyDigest hashes a key (FNV-1a, 64 bits); a scan's digest is the XOR of
// its keys', so the order they are met in does not matter.
func keyDigest(k string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(k); i++ {
		h ^= uint64(k[i])
		h *= 1099511628211
	}
	return h
}

// guard returns what key holds now, as a transaction's guard names it.
// Guard returns what key holds now, as a transaction's guard names it.
func (t *Table) Guard(key string) Guard {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.guard(key)
}

// Remembered reports whether owner's release of key is remembered (a
// repeated release by owner answers as done).
func (t *Table) Remembered(key, owner string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.remembered(key, owner)
}

// LastReleased returns the owner of key's newest remembered release, if
// any: an acquire by that owner is refused.
func (t *Table) LastReleased(key string) (string, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.lastReleased(key)
}

func (t *Table) guard(key string) Guard {
	g := Guard{Key: key}
	if l := t.locks[key]; l != nil {
		g.Mod = l.Mod
	}
	// The newest release's position: the same as when one release per key
	// was remembered, so entries proposed then apply as they did. A
	// release forgotten under a newer one changes no guard: a transaction
	// that read it answers as if it ran before the forgetting, which only
	// ever turns a refusal into a grant.
	if rs := t.mem[key]; len(rs) > 0 {
		g.Mem = rs[len(rs)-1].pos
	}
	return g
}

// grant gives key to w at pos; the caller checked that w's session, if it
// names one, is open.
func (t *Table) grant(key string, w Waiter, pos uint64) {
	// A transaction's grants share its position, as do the hand-offs of a
	// session's end; every other grant's position exceeds every earlier
	// one's.
	t.locks[key] = &Lease{Owner: w.Owner, Token: t.newToken(pos), TTL: w.TTL, Version: pos, Mod: pos, Session: w.Session, Data: w.Value}
	if w.Session != 0 {
		t.sessions[w.Session].keys[key] = struct{}{}
	}
}

// free frees key, whose lease is l, by any means but its holder's
// release: a lock held under a session counts as taken from it.
func (t *Table) free(key string, l *Lease) *Lease { return t.drop(key, l, true) }

// release frees key, whose lease is l, at its holder's request.
func (t *Table) release(key string, l *Lease) *Lease { return t.drop(key, l, false) }

// drop deletes key, whose lease is l, and takes it out of its session, if
// any, counting it as taken from the session if taken is set.
func (t *Table) drop(key string, l *Lease, taken bool) *Lease {
	if l.Kind == KindShared {
		for _, h := range l.Shared.Holders {
			if s := t.sessions[h.Session]; h.Session != 0 && s != nil {
				delete(s.keys, key)
				if taken {
					s.Taken++
				}
			}
		}
	}
	delete(t.locks, key)
	if s := t.sessions[l.Session]; l.Session != 0 && s != nil {
		delete(s.keys, key)
		if taken {
			s.Taken++
		}
	}
	return l
}

// findRelease returns the index of owner's release in rs, or -1.
func findRelease(rs []released, owner string) int {
	for i := range rs {
		if rs[i].owner == owner {
			return i
		}
	}
	return -1
}

// remembered reports whether owner's release of key is remembered as a
// release of a grant (token not 0; a give-up by an owner that held nothing
// is not one: its repeat answers as it did).
func (t *Table) remembered(key, owner string) bool {
	return t.releasedToken(key, owner) != 0
}

// releasedToken returns the token of owner's remembered release of key: 0
// if there is none, or it is a give-up (Command.GiveUp) of an owner that
// held nothing.
func (t *Table) releasedToken(key, owner string) uint64 {
	rs := t.releases(key)
	if i := findRelease(rs, owner); i >= 0 {
		return rs[i].token
	}
	return 0
}

// releases returns key's remembered releases, oldest first; a draft's
// own after its base's (a release in both is the draft's, the newer).
// The caller must not change them.
func (t *Table) releases(key string) []released {
	rs := t.mem[key]
	b := t.memBase
	if b == nil {
		return rs
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	base := b.mem[key]
	if len(base) == 0 {
		return rs
	}
	out := make([]released, 0, len(base)+len(rs))
	for _, x := range base {
		if findRelease(rs, x.owner) < 0 {
			out = append(out, x)
		}
	}
	return append(out, rs...)
}

func (t *Table) lastReleased(key string) (string, bool) {
	if rs := t.releases(key); len(rs) > 0 {
		return rs[len(rs)-1].owner, true
	}
	return "", false
}

// Refuses reports whether an acquire of key by owner is refused (see
// refuses).
func (t *Table) Refuses(key, owner string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.refuses(key, owner)
}

// refuses reports whether an acquire of key by owner is refused: owner's
// release of it is remembered and nobody was granted key after it, as far
// as the releases remembered since tell (a later release of a grant made
// after owner's, token at or after its position, says someone was). With
// releases of grants only, that is exactly "owner's release is the key's
// newest", as it was before give-ups existed: grants of a plain lock do
// not overlap, so every later release's grant came after owner's release.
// A give-up (token 0), or the release of a grant made before owner gave
// up (held across it), does not lift the refusal.
func (t *Table) refuses(key, owner string) bool {
	rs := t.releases(key)
	i := findRelease(rs, owner)
	if i < 0 {
		return false
	}
	for _, later := range rs[i+1:] {
		if later.token >= rs[i].pos {
			return false
		}
	}
	return true
}

// remember adds owner's release of key at pos, the newest. An owner that
// releases the key again is remembered from the new position (its earlier
// queue entry goes stale); past memPerKey releases of the key, its oldest
// is forgotten (never the newest).
func (t *Table) remember(key, owner string, token, pos uint64) {
	rs := t.mem[key]
	if i := findRelease(rs, owner); i >= 0 {
		rs = append(rs[:i], rs[i+1:]...)
		t.memCount--
	}
	rs = append(rs, released{owner: owner, token: token, pos: pos})
	t.memCount++
	if len(rs) > t.memPerKey {
		rs = append(rs[:0], rs[1:]...)
		t.memCount--
	}
	t.mem[key] = rs
	t.memQueue = append(t.memQueue, memRef{key: key, owner: owner, pos: pos})
}

// live returns the index in its key's releases of the release ref names,
// or -1 if ref is stale.
func (t *Table) live(ref memRef) int {
	rs := t.mem[ref.key]
	if i := findRelease(rs, ref.owner); i >= 0 && rs[i].pos == ref.pos {
		return i
	}
	return -1
}

// forget drops remembered releases that are older than the window or, while
// more than memMax keys have one, the oldest. Its effect depends only on the
// live memory, never on stale queue entries, so a table restored from a
// snapshot (which holds no stale entries) forgets exactly as the original
// does. A key's newest release is its last to go (the queue is in position
// order), so the newest releases, which guards and acquires read, are
// forgotten exactly as when they were all that was remembered.
func (t *Table) forget(pos uint64) {
	for len(t.memQueue) > 0 {
		ref := t.memQueue[0]
		i := t.live(ref)
		switch {
		case i < 0:
			// stale: the owner released the key again later, or the
			// key's newer releases pushed it out
		case len(t.mem) > t.memMax || ref.pos+t.memWindow <= pos:
			rs := t.mem[ref.key]
			if rs = append(rs[:i], rs[i+1:]...); len(rs) == 0 {
				delete(t.mem, ref.key)
			} else {
				t.mem[ref.key] = rs
			}
			t.memCount--
		default:
			t.compactMemQueue()
			return
		}
		t.memQueue[0] = memRef{}
		t.memQueue = t.memQueue[1:]
	}
}

// compactMemQueue drops stale entries once they dominate the queue.
func (t *Table) compactMemQueue() {
	if len(t.memQueue) < 1024 || len(t.memQueue) < 2*t.memCount {
		return
	}
	live := make([]memRef, 0, t.memCount)
	for _, ref := range t.memQueue {
		if t.live(ref) >= 0 {
			live = append(live, ref)
		}
	}
	t.memQueue = live
}

// Get returns the lease on key, if it is held.
func (t *Table) Get(key string) (Lease, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l, ok := t.locks[key]
	if !ok {
		return Lease{}, false
	}
	return l.copy(), true
}

// Has reports whether key is in the table, without copying its lease.
func (t *Table) Has(key string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.locks[key]
	return ok
}

// Peek calls f with key's lease, nil if there is none, under the table's
// read lock and without copying it (a shared key's holders included, which
// Get copies). f must not change the lease, keep it or anything it points
// to, or call the table.
func (t *Table) Peek(key string, f func(l *Lease)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	f(t.locks[key])
}

// SetDeadline records the node-local deadline of key's lease if it is still
// the lease ref names; it reports whether it was.
func (t *Table) SetDeadline(key string, ref LeaseRef, deadline int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.locks[key]
	if ok && l.Kind == KindShared {
		if h := l.Shared.byRef(ref); h != nil {
			h.Deadline = deadline
			return true
		}
		return false
	}
	if !ok || l.Ref() != ref {
		return false
	}
	l.Deadline = deadline
	return true
}

// Deadline returns the node-local deadline of key's lease ref names (a
// plain lock's, or a shared key's holder's), and whether ref names a
// current lease.
func (t *Table) Deadline(key string, ref LeaseRef) (int64, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l, ok := t.locks[key]
	switch {
	case !ok:
		return 0, false
	case l.Kind == KindShared:
		if h := l.Shared.byRef(ref); h != nil {
			return h.Deadline, true
		}
		return 0, false
	}
	return l.Deadline, l.Ref() == ref
}

// SetDeadlines sets every lease's node-local deadline to what fn returns for
// it, while holding the table's lock: fn must not call back into the table.
// A shared key's holders are each a lease of their own (fn gets the holder's
// Lease); the shared key itself is not timed.
func (t *Table) SetDeadlines(fn func(key string, l Lease) int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, l := range t.locks {
		if l.Kind == KindShared {
			for _, h := range l.Shared.Holders {
				h.Deadline = fn(k, h.Lease)
			}
			continue
		}
		l.Deadline = fn(k, *l)
	}
}

// Range calls fn for every held lease, in no particular order, while holding
// the table's read lock: fn must not call back into the table.
func (t *Table) Range(fn func(key string, l Lease)) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for k, l := range t.locks {
		fn(k, l.copy())
	}
}

// Len returns the number of held leases.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.locks)
}

// RemovedMember is what OpMember records, in place of a client address, for
// a member being removed (a tombstone): a removed ID is known to have run,
// so a server that lost its state under it and finds it still in a
// configuration is not taken for one that never ran, and its re-adding is
// a new join (which records an address over it).
const RemovedMember = "(removed)"

// RanMember is what OpMember records, in place of a client address, for a
// voter that has not recorded its address yet: a leader records it for
// every voter of its configuration that has no record before it grants
// anything, and a joining member is recorded before it is added. So every
// member that could have acknowledged a grant has a record (an address,
// this marker, or a tombstone), and one that lost its state is not taken
// for one that never ran (server/form.go).
const RanMember = "(ran)"

// Members returns a copy of the recorded client addresses by node ID
// (without the removed members and those recorded without an address).
func (t *Table) Members() map[string]string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	m := make(map[string]string, len(t.members))
	for k, v := range t.members {
		if v != RemovedMember && v != RanMember {
			m[k] = v
		}
	}
	return m
}

// Recorded returns what the cluster recorded for member id: its client
// address, RanMember or RemovedMember; ok is false if nothing was.
func (t *Table) Recorded(id string) (rec string, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	rec, ok = t.members[id]
	return rec, ok
}

// Removed reports that the member id was removed (a tombstone, see
// RemovedMember) and not added again since.
func (t *Table) Removed(id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.members[id] == RemovedMember
}

// Position returns the position of the last applied command, floor + last
// index: the count of commands applied if the table was never restored from
// another cluster's snapshot.
func (t *Table) Position() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.floor + t.lastIndex
}

// LastIndex returns the Raft index of the last applied entry.
func (t *Table) LastIndex() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.lastIndex
}

// ClusterID returns the cluster's ID, or "" if none was committed yet.
func (t *Table) ClusterID() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.clusterID
}
