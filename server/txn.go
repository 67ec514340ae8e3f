package server

import (
	"context"
	"fmt"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/tidwall/match"
)

// maxTxnAttempts bounds how often Update works a transaction out again after
// its entry found a key it read changed (a conflict).
const maxTxnAttempts = 16

// Tx is one request's read-modify-write of the lock table, worked out on the
// leader and committed by Update as one entry (an fsm transaction). Its reads
// see its own writes. It is used by one goroutine, inside Update's function
// only.
type Tx struct {
	n   *Node
	d   *fsm.Draft
	now time.Time
	// newLocks counts the keys this transaction grants that the table holds
	// no lease on, for Config.MaxLocks.
	newLocks int
	rollback bool
}

// Rollback drops everything the transaction did: Update then commits
// nothing and returns as for a transaction that only read. A request whose
// later step finds it must not go on (a multi-key acquire with one key
// taken) calls it, so that none of its steps takes effect.
func (tx *Tx) Rollback() { tx.rollback = true }

// Update runs fn on the leader against the lock table and commits what fn
// did as one Raft entry, which takes effect, all of it, only if no key fn
// read (free keys included) changed in the meantime. Otherwise fn runs again,
// up to maxTxnAttempts times, and then Update returns ErrConflict with
// nothing done. So fn must have no effect outside tx and may run more than
// once; what it last computed is what the entry did.
//
// keys are the keys fn is expected to touch: transactions naming the same
// key wait for each other on this leader rather than conflict. A key fn
// touches that is not among them is still guarded, only not waited for.
//
// A lease that has run out on this leader reads as free, and its expiry goes
// into the same entry. A key fn leaves free while acquires wait for it (WAIT)
// is handed to the first of them in the same entry. If fn changes nothing,
// no entry is written; Update returns once the node has confirmed with a
// quorum that it still leads, so what fn read was current.
//
// Errors: those of fn; NotLeaderError, ErrNoLeader, the context's, or
// ErrConflict when nothing was done; ErrUnknownOutcome when the entry may or
// may not have been committed.
func (n *Node) Update(ctx context.Context, keys []string, fn func(tx *Tx) error) error {
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	var h held
	if err := n.latches.lock(ctx, keys, &h); err != nil {
		return err
	}
	defer n.latches.unlock(&h)
	// Each attempt's draft is given back when it is done with; nothing
	// from it is used after Update returns.
	var tx *Tx
	defer func() {
		if tx != nil {
			tx.d.Release()
		}
	}()
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			tx.d.Release()
			tx = nil
			if err := n.waitReady(ctx); err != nil {
				return err
			}
		}
		tx = &Tx{n: n, d: n.table.Draft(), now: time.Now()}
		if err := fn(tx); err != nil {
			return err
		}
		var c fsm.Command
		writes := false
		if !tx.rollback {
			tx.handToWaiters()
			c, writes = tx.entry()
		}
		if !writes || tx.d.Stale() {
			// No entry checks what fn read: check it here, so that the
			// answer is the table's state at one position (a read of
			// several keys could otherwise straddle an entry that changed
			// them all), then confirm the leadership it was read under.
			// A draft whose two listings of a pattern differed is never
			// current: its entry's guards would hold for the first only.
			if !tx.d.Current() {
				if attempt < maxTxnAttempts {
					continue
				}
				return fmt.Errorf("%w: its keys changed under it %d times", ErrConflict, attempt)
			}
			return n.verifyLeader(ctx)
		}
		if size := c.Txn.Size(); size > n.cfg.MaxWriteSize {
			return fmt.Errorf("%w: the command writes %d bytes in all, more than the limit of %d", ErrLimit, size, n.cfg.MaxWriteSize)
		}
		n.faultBeforeCommit()
		r, err := n.propose(ctx, c)
		switch {
		case err != nil:
			return err
		case r.Code == fsm.Conflict && attempt < maxTxnAttempts:
			continue
		case r.Code == fsm.Conflict:
			return fmt.Errorf("%w: its keys changed under it %d times", ErrConflict, attempt)
		case !tx.d.Same(r):
			// Cannot happen while the draft and Apply share their code; if
			// it does, what the caller computed may not be what was done.
			n.log.Error("a transaction's outcomes differ from its draft", "position", r.Position)
			return fmt.Errorf("%w: the transaction's outcomes differ from its draft", ErrUnknownOutcome)
		}
		return nil
	}
}

// touch reads key into the draft the first time the transaction uses it; a
// lease that ran out on this leader is ended there (its expiry joins the
// entry), as it reads as free.
func (tx *Tx) touch(key string) {
	if tx.d.Read(key) {
		return
	}
	g := tx.n.grants
	// Under the grants' lock the table and the lease deadlines agree (a
	// grant is timed in the same critical section that applies it).
	var l fsm.Lease
	var held bool
	g.locked(func() { l, held = tx.d.Get(key) })
	if held && g.ranOut(lockTimes(l), tx.now) {
		ref := l.Ref()
		_, _ = tx.d.Apply(fsm.Command{Op: fsm.OpExpire, Key: key, Lease: &ref})
	}
}

// Status returns key's lock as the transaction sees it. The token of a lease
// granted by this transaction is not known before it commits: it is 0.
func (tx *Tx) Status(key string) (Status, bool, error) {
	if err := tx.n.checkKey(key); err != nil {
		return Status{}, false, err
	}
	tx.touch(key)
	l, held := tx.d.Get(key)
	if !held {
		return Status{}, false, nil
	}
	s := Status{Owner: l.Owner, Token: l.Token}
	if l.Version == tx.d.Position() {
		// Granted or renewed by this transaction.
		s.Remaining = time.Duration(l.TTL) * time.Millisecond
		if l.Token == tx.d.Position() {
			s.Token = 0
		}
	} else {
		s.Remaining = tx.n.grants.left(lockTimes(l), tx.now)
	}
	return s, true, nil
}

// Acquire grants key to owner for ttl, as Node.Acquire without a wait does
// (redis false), or as Node.AcquireRedis does (redis true). As there, a key
// that acquires wait for (WAIT) is theirs first: it is not granted to
// another owner, even if free.
func (tx *Tx) Acquire(key, owner string, ttl time.Duration, redis bool) (bool, error) {
	n := tx.n
	if err := n.checkLease(key, owner, ttl); err != nil {
		return false, err
	}
	tx.touch(key)
	l, held := tx.d.Get(key)
	var queued, inTable bool
	n.grants.locked(func() {
		queued = n.grants.hasWaitersLocked(key)
		inTable = n.table.Has(key)
	})
	if queued && (!held || l.Owner != owner) {
		return false, nil
	}
	if !held {
		if err := tx.checkNewKey(key); err != nil {
			return false, err
		}
	}
	r, err := tx.apply(fsm.Command{Op: fsm.OpAcquire, Key: key, Owner: owner, TTL: uint64(ttl / time.Millisecond), Redis: redis})
	if err != nil {
		return false, err
	}
	if r.Code == fsm.Granted && !inTable {
		tx.newLocks++
	}
	return r.Code == fsm.Granted || r.Code == fsm.Renewed, nil
}

// Extend renews owner's lease on key for ttl, as Node.Extend.
func (tx *Tx) Extend(key, owner string, ttl time.Duration) (bool, error) {
	if err := tx.n.checkLease(key, owner, ttl); err != nil {
		return false, err
	}
	r, err := tx.apply(fsm.Command{Op: fsm.OpExtend, Key: key, Owner: owner, TTL: uint64(ttl / time.Millisecond)})
	return err == nil && r.Code == fsm.Extended, err
}

// Release frees key if owner holds it, as Node.Release (redis false: the
// release is remembered, and a remembered one reports true), or with Redis's
// semantics (redis true: not remembered, as the Redlock release scripts).
func (tx *Tx) Release(key, owner string, redis bool) (bool, error) {
	if err := tx.n.checkNames(key, owner); err != nil {
		return false, err
	}
	r, err := tx.apply(fsm.Command{Op: fsm.OpRelease, Key: key, Owner: owner, Redis: redis})
	return err == nil && (r.Code == fsm.Released || r.Code == fsm.AlreadyReleased), err
}

// Revoke frees key whoever holds it, as Node.Revoke.
func (tx *Tx) Revoke(key string) (bool, error) {
	if err := tx.n.checkKey(key); err != nil {
		return false, err
	}
	r, err := tx.apply(fsm.Command{Op: fsm.OpRevoke, Key: key})
	return err == nil && r.Code == fsm.Revoked, err
}

// Record is a key as a transaction sees it.
type Record struct {
	Kind fsm.Kind
	// Value is a string's value, or the encoded value of another kind.
	Value string
	// Token is the key's fencing token (zero for kinds without one, and
	// for a key this transaction created: its token is known on commit).
	Token uint64
	// TTL is the key's TTL, zero if it does not expire; Remaining is what
	// is left of it on the leader's clock.
	TTL, Remaining time.Duration
}

// Get returns key's record as the transaction sees it. A key whose TTL ran
// out on the leader is absent (and its expiry joins the entry).
func (tx *Tx) Get(key string) (Record, bool, error) {
	if err := tx.n.checkKey(key); err != nil {
		return Record{}, false, err
	}
	tx.touch(key)
	l, held := tx.d.Get(key)
	if !held {
		return Record{}, false, nil
	}
	rec := Record{Kind: l.Kind, Value: l.Owner, Token: l.Token, TTL: time.Duration(l.TTL) * time.Millisecond}
	if l.Kind != fsm.KindString {
		rec.Value = l.Data
	}
	if l.Token == tx.d.Position() {
		rec.Token = 0
	}
	switch {
	case l.TTL == 0:
		rec.Remaining = forever
	case l.Version == tx.d.Position() && l.Deadline == 0:
		rec.Remaining = rec.TTL // started by this transaction
	default:
		rec.Remaining = tx.n.grants.left(lockTimes(l), tx.now)
	}
	return rec, true, nil
}

// Remembered reports whether the table remembers owner's release of key
// (native semantics, invariant 5): a repeated release by owner answers as
// done. Every owner's release is remembered, not only the last, within the
// release memory's bounds.
func (tx *Tx) Remembered(key, owner string) (bool, error) {
	if err := tx.n.checkKey(key); err != nil {
		return false, err
	}
	tx.touch(key)
	return tx.d.Remembered(key, owner), nil
}

// Refuses reports whether the release memory refuses an acquire of key by
// owner (native semantics, invariant 5): owner's release of it is
// remembered and nobody was granted it since, as far as the memory tells.
func (tx *Tx) Refuses(key, owner string) (bool, error) {
	if err := tx.n.checkKey(key); err != nil {
		return false, err
	}
	tx.touch(key)
	return tx.d.Refuses(key, owner), nil
}

// Put stores value, of kind, under key, replacing whatever it held. ttl > 0
// starts a TTL of ttl (rounded up to a millisecond); ttl == 0 leaves the key
// without one; keepTTL keeps the key's own (none for a new key). A string
// gets a new fencing token when it is created or its value changes; a hash
// when it is created.
func (tx *Tx) Put(key string, kind fsm.Kind, value string, ttl time.Duration, keepTTL bool) error {
	n := tx.n
	if err := n.checkKey(key); err != nil {
		return err
	}
	if len(value) > n.cfg.MaxValueSize {
		return fmt.Errorf("%w: a value of %d bytes is larger than the limit of %d", ErrLimit, len(value), n.cfg.MaxValueSize)
	}
	tx.touch(key)
	if _, held := tx.d.Get(key); !held {
		if err := tx.checkNewKey(key); err != nil {
			return err
		}
	}
	c := fsm.Command{Op: fsm.OpPut, Key: key, Kind: kind, KeepTTL: keepTTL}
	if !keepTTL && ttl > 0 {
		c.TTL = uint64((ttl + time.Millisecond - 1) / time.Millisecond)
	}
	if kind == fsm.KindString {
		c.Owner = value
	} else {
		c.Data = value
	}
	r, err := tx.apply(c)
	if err == nil && r.Created && r.Freed == nil {
		tx.newLocks++
	}
	return err
}

// Keys returns the keys matching pattern (a Redis glob) as the transaction
// sees them: the table's, less those whose TTL ran out on the leader, with
// the transaction's own writes. Every listing is guarded: the names it
// found (the entry applies only if the same keys match then, fsm.Scan),
// and the state of each key it returned or left out as run out, as if the
// transaction had read each one (a run-out key's expiry joins the entry).
// So a key left out as run out that is handed to a waiter before the entry
// applies, its name never leaving the table, still fails the entry. It
// reads the whole table, and a transaction that writes carries a guard for
// every key listed (Config.MaxWriteSize counts them).
func (tx *Tx) Keys(pattern string) []string {
	for _, k := range tx.d.Scan(pattern) {
		tx.touch(k)
	}
	var out []string
	tx.d.Keys(func(k string) {
		if _, held := tx.d.Get(k); held && match.Match(k, pattern) {
			out = append(out, k)
		}
	})
	return out
}

// Del deletes key, whatever it holds, and reports whether it existed.
func (tx *Tx) Del(key string) (bool, error) { return tx.Revoke(key) }

// checkNewKey applies the limits on keys to a key the transaction would
// create: Config.MaxLocks and the quotas.
func (tx *Tx) checkNewKey(key string) error {
	var err error
	tx.n.grants.locked(func() { err = tx.n.grants.checkNewLocked(key, tx.newLocks) })
	return err
}

func (tx *Tx) apply(c fsm.Command) (*fsm.Result, error) {
	tx.touch(c.Key)
	r, err := tx.d.Apply(c)
	if err != nil {
		return nil, invalid("command", "%v", err)
	}
	return r, nil
}

// handToWaiters adds, for each key the transaction leaves free while
// acquires wait for it, the grant to the first of them.
func (tx *Tx) handToWaiters() {
	if len(tx.d.Commands()) == 0 {
		return
	}
	n := tx.n
	var grants []fsm.Command
	n.grants.locked(func() {
		tx.d.Keys(func(key string) {
			if _, held := tx.d.Get(key); held {
				return
			}
			if w := n.grants.headWaiterLocked(key); w != nil {
				grants = append(grants, fsm.Command{Op: fsm.OpGrant, Key: key, Waiter: w})
			}
		})
	})
	for _, g := range grants {
		// A key granted and freed again in this transaction cannot be
		// granted twice (fsm.ErrRegrant): the waiter then gets it from the
		// grant the apply path proposes for a free, awaited key.
		_, _ = tx.d.Apply(g)
	}
}

// entry returns the transaction's entry, and false if it changes nothing
// that needs one: no command, or only the expiry of leases that ran out
// (the expiry loop commits those anyway).
func (tx *Tx) entry() (fsm.Command, bool) {
	c, ok := tx.d.Txn()
	if !ok {
		return c, false
	}
	for _, sc := range c.Txn.Cmds {
		if sc.Op != fsm.OpExpire {
			return c, true
		}
	}
	return c, false
}
