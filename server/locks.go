package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencerlock/fencer/fsm"
	"github.com/hashicorp/raft"
)

// Grant is a lease granted to an owner: its fencing token and its TTL.
type Grant struct {
	Token uint64
	TTL   time.Duration
}

// Status describes the current grant of a held lock.
type Status struct {
	Owner string
	Token uint64
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
	return n.acquire(ctx, key, owner, ttl, wait, false)
}

// AcquireRedis grants key to value for ttl with the semantics of Redis's
// SET key value NX PX ttl: it is refused while the key is held, even by the
// same value, and a release by value is not remembered, so the value may take
// the key again after releasing it. The grant carries a token like any other.
func (n *Node) AcquireRedis(ctx context.Context, key, value string, ttl time.Duration) (Grant, bool, error) {
	return n.acquire(ctx, key, value, ttl, 0, true)
}

func (n *Node) acquire(ctx context.Context, key, owner string, ttl, wait time.Duration, redis bool) (g Grant, granted bool, err error) {
	defer func(start time.Time) { n.metrics.observe("acquire", start, granted, err) }(time.Now())
	if err := n.checkLease(key, owner, ttl); err != nil {
		return Grant{}, false, err
	}
	if wait < 0 || wait > n.cfg.MaxWait {
		return Grant{}, false, invalid("wait %v is outside 0..%v", wait, n.cfg.MaxWait)
	}
	if err := n.waitReady(ctx); err != nil {
		return Grant{}, false, err
	}
	ok := ownerKey{key, owner}
	n.mu.Lock()
	n.live[ok]++
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.endLocked(ok, g.Token)
		n.mu.Unlock()
	}()

	ttlMS := uint64(ttl / time.Millisecond)
	waitEnd := time.Now().Add(wait)
	faultPoint("acquire-ready", key)
	for {
		n.mu.Lock()
		if !n.readyLocked() {
			// Stepped down since the check: queueing here would wait on a
			// node nothing grants on. Ask again (NotLeaderError, or ready
			// once more in a new term).
			n.mu.Unlock()
			if err := n.waitReady(ctx); err != nil {
				return Grant{}, false, err
			}
			continue
		}
		if l, held := n.table.Get(key); held && l.Kind != fsm.KindString {
			n.mu.Unlock()
			return Grant{}, false, ErrWrongType
		}
		c, act := n.acquireCmdLocked(key, owner, ttlMS, wait > 0)
		c.Redis = redis
		switch act {
		case actQueue:
			w := n.enqueueLocked(key, owner, ttlMS)
			n.mu.Unlock()
			return n.awaitGrant(ctx, w, waitEnd)
		case actRefuse:
			n.mu.Unlock()
			return Grant{}, false, nil
		}
		if _, held := n.table.Get(key); !held {
			if n.table.Len() >= n.cfg.MaxLocks {
				n.mu.Unlock()
				return Grant{}, false, fmt.Errorf("%w: the lock table holds its maximum of %d locks", ErrLimit, n.cfg.MaxLocks)
			}
			if err := n.quotas.check(key); err != nil {
				n.mu.Unlock()
				return Grant{}, false, err
			}
		}
		n.mu.Unlock()

		r, err := n.propose(ctx, c)
		if err != nil {
			return Grant{}, false, err
		}
		switch r.Code {
		case fsm.Granted, fsm.Renewed:
			return Grant{Token: r.Lease.Token, TTL: ttl}, true, nil
		case fsm.Refused:
			return Grant{}, false, nil
		}
		if wait <= 0 || !time.Now().Before(waitEnd) {
			return Grant{}, false, nil
		}
		// Held: queue, unless the lock changed hands since the entry.
		n.mu.Lock()
		if l, held := n.table.Get(key); held && l.Owner != owner && n.readyLocked() {
			w := n.enqueueLocked(key, owner, ttlMS)
			n.mu.Unlock()
			return n.awaitGrant(ctx, w, waitEnd)
		}
		n.mu.Unlock()
	}
}

// acquireAction says what an acquire does next.
type acquireAction int

const (
	actPropose acquireAction = iota // propose the entry
	actQueue                        // join the wait queue
	actRefuse                       // answer "not granted" without an entry
)

// acquireCmdLocked builds the acquire entry, or decides that the request
// queues (others already wait for the key) or is refused (the key's lease ran
// out but waiters come first; the expiry hands it to them).
func (n *Node) acquireCmdLocked(key, owner string, ttl uint64, waits bool) (fsm.Command, acquireAction) {
	c := fsm.Command{Op: fsm.OpAcquire, Key: key, Owner: owner, TTL: ttl}
	l, held := n.table.Get(key)
	queued := n.waits.head(key) != nil
	expired := held && n.leases.remaining(l, time.Now()) <= 0
	switch {
	case queued && (!held || l.Owner != owner || expired):
		// Waiters come first, also before a holder whose lease ran out.
		if waits {
			return c, actQueue
		}
		if expired {
			return c, actRefuse
		}
	case expired:
		// The lease ran out on this leader but its Expire is not yet
		// committed: end it in the same entry, so the lock reads and acts
		// as free at once (a holder then gets a new token, not a renewal).
		ref := l.Ref()
		c.Lease = &ref
	}
	return c, actPropose
}

func (n *Node) enqueueLocked(key, owner string, ttl uint64) *waiter {
	w := &waiter{key: key, owner: owner, ttl: ttl, done: make(chan waitOutcome, 1)}
	n.waits.add(w)
	if _, held := n.table.Get(key); !held && !n.granting[key] && n.waits.head(key) == w {
		// Freed between our look and now: hand it over.
		n.granting[key] = true
		n.proposeAsync(fsm.Command{Op: fsm.OpGrant, Key: key, Waiter: &fsm.Waiter{Owner: owner, TTL: ttl}})
	}
	return w
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
	n.mu.Lock()
	if n.waits.remove(w) {
		n.mu.Unlock()
		return Grant{}, false, cause
	}
	n.mu.Unlock()
	// Answered while we gave up.
	o := <-w.done
	if cause != nil && o.granted {
		// The caller is gone and cannot receive it.
		n.mu.Lock()
		n.undeliveredLocked(ownerKey{w.key, w.owner}, o.grant.Token)
		n.mu.Unlock()
		return Grant{}, false, cause
	}
	return o.grant, o.granted, o.err
}

// undeliveredLocked notes a grant that reached no caller; it is revoked when
// the owner's last request in progress ends without returning it.
func (n *Node) undeliveredLocked(ok ownerKey, token uint64) {
	if n.undelivered == nil {
		n.undelivered = make(map[ownerKey]uint64)
	}
	n.undelivered[ok] = token
}

// endLocked ends one acquire of (key, owner) that returned token (zero: none).
func (n *Node) endLocked(ok ownerKey, token uint64) {
	n.live[ok]--
	if t, has := n.undelivered[ok]; has && token != 0 && t == token {
		delete(n.undelivered, ok)
	}
	if n.live[ok] > 0 {
		return
	}
	delete(n.live, ok)
	if t, has := n.undelivered[ok]; has {
		delete(n.undelivered, ok)
		n.revokeUndeliveredLocked(ok, t)
	}
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
	n.mu.Lock()
	c := fsm.Command{Op: fsm.OpExtend, Key: key, Owner: owner, TTL: uint64(ttl / time.Millisecond)}
	if l, held := n.table.Get(key); held && n.leases.remaining(l, time.Now()) <= 0 {
		ref := l.Ref()
		c.Lease = &ref
		c.Waiter = n.headWaiterLocked(key)
	}
	n.mu.Unlock()
	r, err := n.propose(ctx, c)
	if err != nil {
		return false, err
	}
	return r.Code == fsm.Extended, nil
}

// Release frees key if owner holds it, handing it to the first waiter in the
// same commit. It reports true if the lock was released, or if owner's
// release of it is remembered (a repeated release). (A release with Redis's
// semantics, not remembered, is Tx.Release.)
func (n *Node) Release(ctx context.Context, key, owner string) (released bool, err error) {
	defer func(start time.Time) { n.metrics.observe("release", start, released, err) }(time.Now())
	if err := n.checkNames(key, owner); err != nil {
		return false, err
	}
	if err := n.waitReady(ctx); err != nil {
		return false, err
	}
	n.mu.Lock()
	c := fsm.Command{Op: fsm.OpRelease, Key: key, Owner: owner, Waiter: n.headWaiterLocked(key)}
	n.mu.Unlock()
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
	n.mu.Lock()
	c := fsm.Command{Op: fsm.OpRevoke, Key: key, Waiter: n.headWaiterLocked(key)}
	n.mu.Unlock()
	r, err := n.propose(ctx, c)
	if err != nil {
		return false, err
	}
	return r.Code == fsm.Revoked, nil
}

// revokeUndeliveredLocked revokes a grant that reached no caller, by owner
// and token only, so that nothing else is touched.
func (n *Node) revokeUndeliveredLocked(ok ownerKey, token uint64) {
	if !n.readyLocked() {
		// A new leader restarts the lease; it ends after its TTL.
		return
	}
	if l, held := n.table.Get(ok.key); !held || l.Owner != ok.owner || l.Token != token {
		return
	}
	n.log.Debug("revoking a grant no caller received", "key", ok.key, "owner", ok.owner, "token", token)
	n.proposeAsync(fsm.Command{Op: fsm.OpRevoke, Key: ok.key, Owner: ok.owner,
		Lease: &fsm.LeaseRef{Token: token}, Waiter: n.headWaiterLocked(ok.key)})
}

// Status returns the current grant of key; held is false if key is free or
// its lease ran out on the leader. The read is linearizable: the leader
// confirms its leadership before answering.
func (n *Node) Status(ctx context.Context, key string) (s Status, held bool, err error) {
	if err := n.checkKey(key); err != nil {
		return Status{}, false, err
	}
	if !faultActive("stale-reads") {
		if err := n.verifyLeader(ctx); err != nil {
			return Status{}, false, err
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	l, held := n.table.Get(key)
	if !held {
		return Status{}, false, nil
	}
	if l.Kind != fsm.KindString {
		return Status{}, false, ErrWrongType
	}
	rem := n.leases.remaining(l, time.Now())
	if rem <= 0 && !faultActive("stale-reads") {
		return Status{}, false, nil
	}
	return Status{Owner: l.Owner, Token: l.Token, Remaining: rem}, true, nil
}

// Check reports whether token is the current, unexpired grant of key.
func (n *Node) Check(ctx context.Context, key string, token uint64) (bool, error) {
	s, held, err := n.Status(ctx, key)
	if err != nil {
		return false, err
	}
	return held && s.Token == token, nil
}

// verifyLeader waits until this node is a ready leader and has confirmed,
// with a quorum, that it still is.
func (n *Node) verifyLeader(ctx context.Context) error {
	if err := n.waitReady(ctx); err != nil {
		return err
	}
	ch := make(chan error, 1)
	go func() { ch <- n.raft.VerifyLeader().Error() }()
	select {
	case err := <-ch:
		if err != nil {
			return n.translate(err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %v", ErrNoLeader, ctx.Err())
	}
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
		return nil, invalid("entry of %d bytes exceeds %d", len(data), fsm.MaxEntrySize)
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

// translate maps Raft's errors to this package's.
func (n *Node) translate(err error) error {
	switch {
	case errors.Is(err, errNotSent):
		return ErrShutdown // never reached Raft: nothing was done
	case errors.Is(err, raft.ErrNotLeader):
		lid, addr := n.Leader()
		return &NotLeaderError{Leader: lid, LeaderAddr: addr}
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return ErrNoLeader
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: leadership lost while the command was in flight", ErrUnknownOutcome)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: %w", ErrUnknownOutcome, ErrShutdown)
	}
	return fmt.Errorf("%w: %v", ErrUnknownOutcome, err)
}

func (n *Node) checkKey(key string) error {
	if key == "" {
		return invalid("empty key")
	}
	if len(key) > n.cfg.MaxKeyLen {
		return invalid("key of %d bytes is longer than %d", len(key), n.cfg.MaxKeyLen)
	}
	return nil
}

func (n *Node) checkNames(key, owner string) error {
	if err := n.checkKey(key); err != nil {
		return err
	}
	if owner == "" {
		return invalid("empty owner")
	}
	if len(owner) > n.cfg.MaxOwnerLen {
		return invalid("owner of %d bytes is longer than %d", len(owner), n.cfg.MaxOwnerLen)
	}
	return nil
}

func (n *Node) checkLease(key, owner string, ttl time.Duration) error {
	if err := n.checkNames(key, owner); err != nil {
		return err
	}
	if ttl < n.cfg.MinTTL || ttl > n.cfg.MaxTTL {
		return invalid("ttl %v is outside %v..%v", ttl, n.cfg.MinTTL, n.cfg.MaxTTL)
	}
	return nil
}
