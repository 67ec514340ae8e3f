package server

import (
	"context"
	"fmt"
	"time"

	"github.com/fencerlock/fencer/fsm"
)

// Grant is a lease granted to an owner: its fencing token and its TTL, and
// for a semaphore's permit its slot.
type Grant struct {
	Token uint64
	TTL   time.Duration
	Slot  int
}

// grantOf returns the grant an applied entry made: a plain lock's lease, or
// a shared key's holder (the acquire's, or its waiter's).
func grantOf(r *fsm.Result) Grant {
	if h := r.Holder; h != nil {
		return Grant{Token: h.Token, TTL: time.Duration(h.TTL) * time.Millisecond, Slot: int(h.Slot)}
	}
	return Grant{Token: r.Lease.Token, TTL: time.Duration(r.Lease.TTL) * time.Millisecond}
}

// Status describes the current grant of a held lock.
type Status struct {
	Owner string
	Token uint64
	// Session is the session the lock is held under (zero: none), and
	// Value its value there (an election's leader's value).
	Session uint64
	Value   string
	// Remaining is the time left on the leader's clock; NoExpiry for a
	// string stored without a TTL (by a Redis-compatible SET).
	Remaining time.Duration
}

// NoExpiry is the Remaining of a key that has no TTL.
const NoExpiry = forever

// Acquire grants key to owner for ttl and returns the grant. If owner already
// holds key, the lease is renewed and the same token returned, so a retry is
// harmless. If another owner holds it, granted is false; with wait > 0 the
// request first queues, in arrival order, until the lock is handed to it or
// wait passes. A newer wait by the same owner takes the older one's place in
// the line.
func (n *Node) Acquire(ctx context.Context, key, owner string, ttl, wait time.Duration) (g Grant, granted bool, err error) {
	return n.acquire(ctx, acquireReq{key: key, owner: owner, ttl: uint64(ttl / time.Millisecond)}, ttl, wait)
}

// AcquireRedis grants key to value for ttl with the semantics of Redis's
// SET key value NX PX ttl: it is refused while the key is held, even by the
// same value, and a release by value is not remembered, so the value may take
// the key again after releasing it. The grant carries a token like any other.
func (n *Node) AcquireRedis(ctx context.Context, key, value string, ttl time.Duration) (Grant, bool, error) {
	return n.acquire(ctx, acquireReq{key: key, owner: value, ttl: uint64(ttl / time.Millisecond), redis: true}, ttl, 0)
}

// acquire is Acquire of a: under a session if a names one (ttl is then
// zero: the lock lives as long as the session).
func (n *Node) acquire(ctx context.Context, a acquireReq, ttl, wait time.Duration) (g Grant, granted bool, err error) {
	defer func(start time.Time) { n.metrics.observe("acquire", start, granted, err) }(time.Now())
	key, owner := a.key, a.owner
	if a.session != 0 {
		err = n.checkNames(key, owner)
		if err == nil && len(a.value) > n.cfg.MaxOwnerLen {
			err = invalid("value", "%d bytes, longer than %d", len(a.value), n.cfg.MaxOwnerLen)
		}
	} else {
		err = n.checkLease(key, owner, ttl)
	}
	if err != nil {
		return Grant{}, false, err
	}
	if wait < 0 || wait > n.cfg.MaxWait {
		return Grant{}, false, invalid("wait", "%v is outside 0..%v", wait, n.cfg.MaxWait)
	}
	if err := n.waitReady(ctx); err != nil {
		return Grant{}, false, err
	}
	ok := ownerKey{key, owner}
	n.grants.begin(ok)
	defer func() { n.grants.end(ok, g.Token) }()

	waitEnd := time.Now().Add(wait)
	faultPoint(pointAcquireReady, key)
	for {
		step := n.grants.plan(a, wait > 0)
		switch step.act {
		case actNotReady:
			// Ask again: NotLeaderError, or ready once more in a new term.
			if err := n.waitReady(ctx); err != nil {
				return Grant{}, false, err
			}
			continue
		case actFail:
			return Grant{}, false, step.err
		case actQueue:
			return n.awaitGrant(ctx, step.waiter, waitEnd)
		case actRefuse:
			return Grant{}, false, nil
		}
		r, err := n.propose(ctx, step.cmd)
		if err != nil {
			return Grant{}, false, err
		}
		switch r.Code {
		case fsm.Granted, fsm.Renewed:
			gr := grantOf(r)
			gr.TTL = ttl
			return gr, true, nil
		case fsm.Mismatch:
			// The key changed kind since plan looked: ask again, to
			// answer what it is now.
			continue
		case fsm.Refused:
			return Grant{}, false, nil
		case fsm.NoSession:
			return Grant{}, false, ErrNoSession
		}
		if wait <= 0 || !time.Now().Before(waitEnd) {
			return Grant{}, false, nil
		}
		// Held: queue, unless the lock changed hands since the entry.
		if w := n.grants.queueBehind(a); w != nil {
			return n.awaitGrant(ctx, w, waitEnd)
		}
	}
}

// awaitGrant waits for w to be granted, until waitEnd or ctx ends.
func (n *Node) awaitGrant(ctx context.Context, w *waiter, waitEnd time.Time) (Grant, bool, error) {
	timer := time.NewTimer(time.Until(waitEnd))
	defer timer.Stop()
	var cause error
	select {
	case o := <-w.done:
		return o.grant, o.granted, o.err
	case <-timer.C:
	case <-ctx.Done():
		cause = ctx.Err()
	}
	if n.grants.withdraw(w) {
		return Grant{}, false, cause
	}
	// Answered while we gave up.
	o := <-w.done
	if cause != nil && o.granted {
		// The caller is gone and cannot receive it.
		n.grants.noteUndelivered(ownerKey{w.key, w.owner}, o.grant.Token)
		return Grant{}, false, cause
	}
	return o.grant, o.granted, o.err
}

// Extend renews owner's lease on key for ttl. It reports false if owner does
// not hold key, including when its lease already ran out on the leader.
func (n *Node) Extend(ctx context.Context, key, owner string, ttl time.Duration) (extended bool, err error) {
	defer func(start time.Time) { n.metrics.observe("extend", start, extended, err) }(time.Now())
	if err := n.checkLease(key, owner, ttl); err != nil {
		return false, err
	}
	if err := n.waitReady(ctx); err != nil {
		return false, err
	}
	c := fsm.Command{Op: fsm.OpExtend, Key: key, Owner: owner, TTL: uint64(ttl / time.Millisecond)}
	// A lease that ran out on this leader ends in the same entry.
	c.Lease, c.Waiter = n.grants.expired(key, owner)
	r, err := n.propose(ctx, c)
	if err != nil {
		return false, err
	}
	return r.Code == fsm.Extended, nil
}

// Release frees key if owner holds it, handing it to the first waiter in the
// same commit. It reports true if the lock was released, or if owner's
// release of it is remembered (a repeated release). Whether or not owner
// holds key, its wait for key is answered "not granted", and nothing is
// granted to it after the release: a plain lock's acquire by owner is
// refused until someone else is granted key after it. (A release with
// Redis's semantics, not remembered, is Tx.Release.)
func (n *Node) Release(ctx context.Context, key, owner string) (released bool, err error) {
	return n.release(ctx, key, owner, 0)
}

func (n *Node) release(ctx context.Context, key, owner string, session uint64) (released bool, err error) {
	defer func(start time.Time) { n.metrics.observe("release", start, released, err) }(time.Now())
	if err := n.checkNames(key, owner); err != nil {
		return false, err
	}
	if err := n.waitReady(ctx); err != nil {
		return false, err
	}
	// The owner gives up the key: its wait for it ends here, and (outside
	// a session) the entry remembers the release even if it holds nothing
	// yet, so no grant to it on its way (an acquire or wait round in
	// flight, a hand-off) takes effect after it.
	// The flag is of format level 1 (fsm/format.go): below it the release
	// is remembered only if it frees a grant, as builds of level 0 do.
	c := fsm.Command{Op: fsm.OpRelease, Key: key, Owner: owner, Session: session, GiveUp: session == 0 && n.giveUps(),
		Waiter: n.grants.releasing(key, owner)}
	r, err := n.propose(ctx, c)
	if err != nil {
		return false, err
	}
	return r.Code == fsm.Released || r.Code == fsm.AlreadyReleased, nil
}

// Revoke frees key whoever holds it: an administrative force-release. It is
// not remembered as the holder's release. It reports whether the key was held.
func (n *Node) Revoke(ctx context.Context, key string) (bool, error) {
	if err := n.checkKey(key); err != nil {
		return false, err
	}
	if err := n.waitReady(ctx); err != nil {
		return false, err
	}
	c := fsm.Command{Op: fsm.OpRevoke, Key: key, Waiter: n.grants.headWaiter(key)}
	r, err := n.propose(ctx, c)
	if err != nil {
		return false, err
	}
	return r.Code == fsm.Revoked, nil
}

// Status returns the current grant of key; held is false if key is free or
// its lease ran out on the leader. The read is linearizable: the leader
// confirms its leadership before answering.
func (n *Node) Status(ctx context.Context, key string) (s Status, held bool, err error) {
	if err := n.checkKey(key); err != nil {
		return Status{}, false, err
	}
	if !faultActive(faultStaleReads) {
		if err := n.verifyLeader(ctx); err != nil {
			return Status{}, false, err
		}
	}
	l, held, rem := n.grants.lease(key)
	if !held {
		return Status{}, false, nil
	}
	if l.Kind != fsm.KindString {
		return Status{}, false, ErrWrongType
	}
	if rem <= 0 && !faultActive(faultStaleReads) {
		return Status{}, false, nil
	}
	return Status{Owner: l.Owner, Token: l.Token, Remaining: rem, Session: l.Session, Value: l.Data}, true, nil
}

// verifyLeader waits until this node is a ready leader and has confirmed,
// with a quorum, that it still is.
func (n *Node) verifyLeader(ctx context.Context) error {
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	// A read: no answer in time is a definite failure.
	return n.await(ctx, n.raft.VerifyLeader, noLeader)
}

// propose commits c and returns its result. If ctx ends first, the error is
// ctx's own while c still waits in the batcher's queue (it is withdrawn and
// never takes effect) and ErrUnknownOutcome once it was sent to Raft. The
// send itself (submitAndSend, when nothing is in flight) does not watch ctx;
// it waits only for room in Raft's apply queue, which holds at most one
// entry of the batcher's (unless --max-batch is 1).
func (n *Node) propose(ctx context.Context, c fsm.Command) (*fsm.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type applied struct {
		res *fsm.Result
		err error
	}
	data := c.Encode(nil)
	if len(data) > fsm.MaxEntrySize {
		// Unreachable with validated limits; a guard, not a code path.
		return nil, invalid("command", "its entry of %d bytes exceeds %d", len(data), fsm.MaxEntrySize)
	}
	if c.Op == fsm.OpTxn {
		// A transaction's commands decode under rules of their own (no
		// session parts); one that does not would stop Apply on every
		// node, on every replay. Refused here, it is an error to its caller.
		if _, err := fsm.Decode(data); err != nil {
			return nil, fmt.Errorf("%w: the transaction does not decode: %v", ErrInvalidArgument, err)
		}
	}
	ch := make(chan applied, 1)
	id := n.batch.submitAndSend(data, func(r *fsm.Result, err error) {
		switch {
		case err != nil:
			ch <- applied{err: n.translate(err)}
		case r == nil:
			ch <- applied{err: fmt.Errorf("%w: no result for the entry", ErrUnknownOutcome)}
		default:
			ch <- applied{res: r}
		}
	})
	select {
	case a := <-ch:
		if a.err == nil {
			n.faultAfterCommit()
		}
		return a.res, a.err
	case <-ctx.Done():
		if n.batch.withdraw(id) {
			// Still queued for an entry: it never reached Raft.
			return nil, ctx.Err()
		}
		select {
		case a := <-ch: // answered meanwhile
			return a.res, a.err
		default:
		}
		return nil, fmt.Errorf("%w: %v", ErrUnknownOutcome, ctx.Err())
	}
}

func (n *Node) checkKey(key string) error {
	if key == "" {
		return invalid("key", "empty")
	}
	if len(key) > n.cfg.MaxKeyLen {
		return invalid("key", "%d bytes, longer than %d", len(key), n.cfg.MaxKeyLen)
	}
	return nil
}

func (n *Node) checkNames(key, owner string) error {
	if err := n.checkKey(key); err != nil {
		return err
	}
	if owner == "" {
		return invalid("owner", "empty")
	}
	if len(owner) > n.cfg.MaxOwnerLen {
		return invalid("owner", "%d bytes, longer than %d", len(owner), n.cfg.MaxOwnerLen)
	}
	return nil
}

func (n *Node) checkLease(key, owner string, ttl time.Duration) error {
	if err := n.checkNames(key, owner); err != nil {
		return err
	}
	if ttl < n.cfg.MinTTL || ttl > n.cfg.MaxTTL {
		return invalid("ttl", "%v is outside %v..%v", ttl, n.cfg.MinTTL, n.cfg.MaxTTL)
	}
	return nil
}
