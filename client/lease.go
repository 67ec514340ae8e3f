package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// LeaseOption configures Acquire and TryAcquire.
type LeaseOption func(*leaseConfig)

type leaseConfig struct {
	ttl       time.Duration
	autoRenew bool
	owner     string
	session   *Session
	value     string
}

// WithSession acquires the lock under session s: it has no TTL of its own
// and lives as long as the session, which one keepalive renews for all its
// locks. The lease's context ends when the session does. WithTTL and
// WithAutoRenew do not apply. The default is no session.
func WithSession(s *Session) LeaseOption {
	return func(c *leaseConfig) { c.session = s }
}

// WithValue gives a lock held under a session (WithSession) a value that
// FENCE.HOLDER and watchers see: an election's leader's value. The default
// is none.
func WithLockValue(value string) LeaseOption {
	return func(c *leaseConfig) { c.value = value }
}

// defaultTTL is the TTL of leases and mutexes, redsync's default expiry.
const defaultTTL = 8 * time.Second

// WithTTL sets the lease's time to live: the server frees the lock when it
// has not been extended for that long. The server accepts 100ms to 24h by
// default. The default is 8s.
func WithTTL(ttl time.Duration) LeaseOption {
	return func(c *leaseConfig) { c.ttl = ttl }
}

// WithAutoRenew keeps the lease alive in the background, extending it about
// every TTL/3, until it is released. Transient failures (a node down, an
// election) are retried on the other addresses while the lease is still
// valid; the lease's context is cancelled only when the lease is definitely
// lost or its validity runs out. The default is no renewal.
func WithAutoRenew() LeaseOption {
	return func(c *leaseConfig) { c.autoRenew = true }
}

// WithOwner sets the owner value sent to the server instead of a random one.
// It must be unique per lease: the server refuses an acquire by an owner
// whose release of the same lock it remembers, and treats two holders with
// the same owner as one. The default is 16 random bytes in hex.
func WithOwner(owner string) LeaseOption {
	return func(c *leaseConfig) { c.owner = owner }
}

// Lease is a granted lock: its fencing token, and a context that lives as
// long as the lease is valid.
//
// Pass Token to the storage the lock protects, with every write, and let the
// storage reject a token lower than one it has seen: a lease can end without
// its holder noticing in time (a pause, a partition), and only the token
// keeps such a holder's writes out.
type Lease struct {
	c       *Client
	session *Session // nil: a lease with a TTL of its own
	value   string   // under a session
	name    string
	names   []string // several keys at once (AcquireAll): every key, name the first
	owner   string
	token   uint64
	slot    int          // a permit's slot
	kind    atomic.Int32 // a lockKind; Downgrade turns a write lease into a read lease
	// validity is the lease's own, or under a session only its context
	// (the session keeps the time).
	validity
	renewd chan struct{} // closed when the renewal goroutine ends

	releaseMu sync.Mutex // serializes Release
	released  bool
}

// Acquire waits for the lock name and returns a lease on it, with a fresh
// random owner. It waits in the server's queue for the lock, first come
// first served, until the lock is granted or ctx ends; it does not poll.
// Each wait is capped at about half the TTL and renewed before it ends
// (keeping the place in the queue), so that a grant never arrives with its
// validity already spent.
//
// The error wraps ctx.Err() when ctx ended first (and ErrLocked too if the
// lock was held by another owner at that time), ErrNoLeader when no node
// could serve it, ErrInvalidArgument for a bad name or TTL.
func (c *Client) Acquire(ctx context.Context, name string, opts ...LeaseOption) (*Lease, error) {
	return c.acquireLease(ctx, lockReq{kind: plainLock, name: name}, true, opts)
}

// TryAcquire is Acquire without waiting: if another owner holds the lock it
// returns an error wrapping ErrLocked at once.
func (c *Client) TryAcquire(ctx context.Context, name string, opts ...LeaseOption) (*Lease, error) {
	return c.acquireLease(ctx, lockReq{kind: plainLock, name: name}, false, opts)
}

// acquireLease takes q's lock (its kind and keys set) with the options and
// returns its lease: the one path of every kind of lease, so that each
// gets the same validity, renewals, retries and waits.
func (c *Client) acquireLease(ctx context.Context, q lockReq, wait bool, opts []LeaseOption) (*Lease, error) {
	cfg := leaseConfig{ttl: defaultTTL}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.value != "" && q.kind != plainLock {
		return nil, fmt.Errorf("%w: a lock value (WithLockValue) is for plain locks only", ErrInvalidArgument)
	}
	q.owner, q.value = cfg.owner, cfg.value
	if q.owner == "" {
		var err error
		if q.owner, err = randomOwner(); err != nil {
			return nil, err
		}
	}
	if s := cfg.session; s != nil {
		q.ttl, q.session = s.ttl, s.id
		return c.acquireInSession(ctx, s, q, wait)
	}
	q.ttl = cfg.ttl
	drift := allowance(cfg.ttl, c.cfg.drift)
	g, err := c.acquireReq(ctx, q, drift, wait)
	if err != nil {
		return nil, err
	}
	l := newLease(c, q, g)
	l.start(c.ctx, g.ttl, drift, g.sent, func(until time.Time) error {
		return fmt.Errorf("%w: its validity ran out (at %s) before a renewal succeeded", ErrLeaseLost, until.Format(time.RFC3339Nano))
	})
	g.rounds.follow(l.ctx)
	if cfg.autoRenew {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			l.renewLoop(l.extend, l.renewd)
		}()
	} else {
		close(l.renewd)
	}
	return l, nil
}

// randomOwner returns 16 random bytes in hex. (Not base64: the fencer CLI
// prints the owner for the user to pass back as an argument, and one that
// began with '-' read as a flag.)
func randomOwner() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("client: generating an owner: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// newLease is the lease of q's grant g; its validity is not started.
func newLease(c *Client, q lockReq, g grant) *Lease {
	l := &Lease{c: c, name: q.name, names: q.names, owner: q.owner, token: g.token, slot: g.slot, renewd: make(chan struct{})}
	l.kind.Store(int32(q.kind))
	return l
}

// Name returns the lock's name; for several keys (AcquireAll), the first.
func (l *Lease) Name() string { return l.name }

// Names returns the names of the lease's locks: the keys of AcquireAll
// without duplicates, in the order given, or the one name.
func (l *Lease) Names() []string {
	if l.names == nil {
		return []string{l.name}
	}
	return append([]string(nil), l.names...)
}

// Slot returns a semaphore permit's slot, 0 to permits − 1: the lowest slot
// that was free when it was granted. Fence per (resource, slot) with it
// (fence.SlotResource). It is −1 if the lease is not a permit.
func (l *Lease) Slot() int {
	if l.lockKind() != permit {
		return -1
	}
	return l.slot
}

func (l *Lease) lockKind() lockKind { return lockKind(l.kind.Load()) }

// Owner returns the owner value the lease was granted to.
func (l *Lease) Owner() string { return l.owner }

// Token returns the fencing token of the grant: larger than the token of
// every earlier grant of the same lock. It does not change when the lease is
// extended or downgraded. Readers of a read-write lock that hold it
// together have different tokens; the keys of AcquireAll share one.
func (l *Lease) Token() uint64 { return l.token }

// TTL returns the lease's time to live.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Until returns the end of the lease's validity as the client counts it:
// from just before it sent the request that granted or last extended the
// lease, the TTL less a drift allowance. The server frees the lock no
// earlier than that.
func (l *Lease) Until() time.Time {
	if l.session != nil {
		return l.session.Until()
	}
	return l.validUntil()
}

// Context returns a context that is cancelled when the lease ends: lost, its
// validity run out, released, or the client closed. context.Cause tells
// which (ErrLeaseLost, ErrReleased, ErrClosed). Run the work the lease
// protects under it.
func (l *Lease) Context() context.Context { return l.ctx }

// Done returns a channel that is closed when the lease ends; it is
// Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err returns nil while the lease is valid, and then why it ended: an error
// wrapping ErrLeaseLost, or ErrReleased, or ErrClosed.
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	return context.Cause(l.ctx)
}

// Extend renews the lease for its TTL from now, retrying transient failures
// on the other addresses until ctx ends or the lease's validity runs out.
// It returns an error wrapping ErrLeaseLost, and cancels the lease's
// context, if the server says the owner no longer holds the lock. A lease
// that has already ended cannot be extended.
func (l *Lease) Extend(ctx context.Context) error {
	if l.session != nil {
		if err := l.Err(); err != nil {
			return err
		}
		if err := l.session.KeepAlive(ctx); err != nil {
			return err
		}
		// The keepalive ends this lease if its lock was taken from the
		// session (revoked, overwritten).
		return l.Err()
	}
	return l.extend(ctx)
}

// req is the lease's lock as requests name it.
func (l *Lease) req() lockReq {
	q := lockReq{kind: l.lockKind(), name: l.name, names: l.names, owner: l.owner, ttl: l.ttl}
	if l.session != nil {
		q.session = l.session.id
	}
	return q
}

// bound returns ctx, also ended (with the lease's cause) when the lease
// ends; done releases it.
func (l *Lease) bound(ctx context.Context) (bctx context.Context, done func()) {
	bctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	return bctx, func() { stop(); cancel(nil) }
}

func (l *Lease) extend(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	// Stop when either the caller or the lease is done.
	ctx, done := l.bound(ctx)
	defer done()

	q := l.req()
	p := retry{attempt: func() time.Duration { return l.attemptTimeout(l.c) }}
	v, sent, err := l.c.exchange(ctx, p, q.extendArgs()...)
	if err != nil {
		if cerr := l.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("extend %s: %w", q.what(), err)
	}
	if n, _ := v.(int64); n != int64(q.keys()) {
		err := fmt.Errorf("%w: the server says owner %q no longer holds %s", ErrLeaseLost, l.owner, q.what())
		if n > 0 {
			// Some keys of the set were extended, and are held for
			// nothing now: let them go.
			err = fmt.Errorf("%w: the server says owner %q holds %d of the %d keys %s", ErrLeaseLost, l.owner, n, q.keys(), q.what())
			l.c.releaseLater(q)
		}
		l.cancel(err)
		return l.Err()
	}
	l.renewed(sent)
	return nil
}

// Release ends the lease: it cancels the lease's context (cause
// ErrReleased), stops renewals, and frees the lock on the server, handing it
// to the first waiter. It retries transient failures on the other addresses
// until ctx ends. It returns nil once the lock is released, and an error
// wrapping ErrLeaseLost if the server says the owner no longer held it.
// Calling it again after it succeeded returns nil.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseMu.Lock()
	defer l.releaseMu.Unlock()
	if l.released {
		return nil
	}
	// Cancel first, so that work under the lease stops before another
	// owner can be granted the lock.
	l.cancel(ErrReleased)
	l.stopTimer()
	<-l.renewd
	q := l.req()
	ok, err := l.c.release(ctx, q)
	switch {
	case err != nil:
		return err
	case !ok:
		l.released = true
		return fmt.Errorf("%w: the server says owner %q no longer held %s", ErrLeaseLost, l.owner, q.what())
	}
	l.released = true
	return nil
}

// acquireReq gets q's lock, waiting for it if wait is set. A grant
// arrives with at least part of its validity left, or acquireReq fails.
func (c *Client) acquireReq(ctx context.Context, q lockReq, drift time.Duration, wait bool) (grant, error) {
	if err := q.check(drift); err != nil {
		return grant{}, err
	}
	name := q.what()
	g, granted, err := c.tryAcquire(ctx, q)
	if err == nil && !granted && wait {
		g, err = c.waitAcquire(ctx, q)
		granted = err == nil
	}
	if err != nil {
		return grant{}, fmt.Errorf("acquire %s: %w", name, err)
	}
	if !granted {
		return grant{}, fmt.Errorf("acquire %s: %w", name, ErrLocked)
	}
	if q.session != 0 || time.Until(g.sent.Add(g.ttl-drift)) > 0 {
		// (Under a session the grant is valid as long as the session.)
		return g, nil
	}
	// The grant took longer than its validity to arrive: renew it, which
	// counts from now, or give it up.
	v, sent, err := c.exchange(ctx, c.standard(), q.extendArgs()...)
	if n, _ := v.(int64); err == nil && n == int64(q.keys()) && time.Until(sent.Add(g.ttl-drift)) > 0 {
		g.sent = sent
		return g, nil
	}
	c.releaseLater(q)
	g.rounds.abandon()
	return grant{}, fmt.Errorf("acquire %s: %w: the grant arrived after its validity ended", name, ErrLeaseLost)
}

func checkLease(name string, ttl, drift time.Duration) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalidArgument)
	case ttl < time.Millisecond || ttl <= drift:
		return fmt.Errorf("%w: ttl %v is too short", ErrInvalidArgument, ttl)
	}
	return nil
}

// tryAcquire sends one acquire without WAIT (retried on other nodes if its
// outcome is unknown: an acquire by the holder returns the same grant). If
// it gives up with the outcome unknown, it releases in the background.
func (c *Client) tryAcquire(ctx context.Context, q lockReq) (grant, bool, error) {
	v, sent, err := c.exchange(ctx, c.standard(), q.acquireArgs(0)...)
	if err != nil {
		if !errIs(err, ErrInvalidArgument, ErrWrongType, ErrClosed, ErrAuth, ErrNoPerm, ErrTLS, ErrSessionEnded) {
			c.releaseLater(q)
		}
		return grant{}, false, err
	}
	return parseGrant(v, q, sent)
}

// release frees q's locks if owner holds them; ok is false if the server
// says owner neither holds them nor released them last (for all the keys
// of several).
func (c *Client) release(ctx context.Context, q lockReq) (ok bool, err error) {
	v, _, err := c.exchange(ctx, c.standard(), q.releaseArgs()...)
	if err != nil {
		return false, fmt.Errorf("release %s: %w", q.what(), err)
	}
	n, _ := v.(int64)
	return n == int64(q.keys()), nil
}

// releaseLater releases name for owner in the background, for an acquire
// whose outcome is unknown: the release is remembered, so a late grant
// cannot outlive the caller who gave up on it.
func (c *Client) releaseLater(q lockReq) {
	if c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.failoverTimeout)
		defer cancel()
		_, _ = c.release(ctx, q)
	}()
}

// releaseAgainPauses are the pauses before each repeat of releaseAgain's
// release. A release may come before a request of the owner still on its
// way (sent on a connection since closed), and the server neither
// remembers a release of a read lock or permit, nor one by an owner that
// does not hold the lock; so it is sent again for about a second, also
// after it freed something (there may be more than one such request).
var releaseAgainPauses = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}

// releaseAgain is releaseLater for requests of the owner that may still
// reach the server (wait rounds whose outcome is unknown): it repeats the
// release after each of releaseAgainPauses.
func (c *Client) releaseAgain(q lockReq) {
	if c.ctx.Err() != nil {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for i := 0; ; i++ {
			ctx, cancel := context.WithTimeout(c.ctx, c.cfg.failoverTimeout)
			_, _ = c.release(ctx, q)
			cancel()
			if i == len(releaseAgainPauses) {
				return
			}
			select {
			case <-time.After(releaseAgainPauses[i]):
			case <-c.ctx.Done():
				return
			}
		}
	}()
}

// errIs reports whether err is one of targets.
func errIs(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
