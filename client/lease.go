package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
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
	owner   string
	token   uint64
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
	return c.acquireLease(ctx, name, true, opts)
}

// TryAcquire is Acquire without waiting: if another owner holds the lock it
// returns an error wrapping ErrLocked at once.
func (c *Client) TryAcquire(ctx context.Context, name string, opts ...LeaseOption) (*Lease, error) {
	return c.acquireLease(ctx, name, false, opts)
}

func (c *Client) acquireLease(ctx context.Context, name string, wait bool, opts []LeaseOption) (*Lease, error) {
	cfg := leaseConfig{ttl: defaultTTL}
	for _, o := range opts {
		o(&cfg)
	}
	owner := cfg.owner
	if owner == "" {
		var err error
		if owner, err = randomOwner(); err != nil {
			return nil, err
		}
	}
	if s := cfg.session; s != nil {
		return c.acquireInSession(ctx, s, lockReq{name: name, owner: owner, ttl: s.ttl, session: s.id, value: cfg.value}, wait)
	}
	drift := allowance(cfg.ttl, c.cfg.drift)
	g, err := c.acquire(ctx, name, owner, cfg.ttl, drift, wait)
	if err != nil {
		return nil, err
	}
	l := &Lease{c: c, name: name, owner: owner, token: g.token, renewd: make(chan struct{})}
	l.start(c.ctx, g.ttl, drift, g.sent, func(until time.Time) error {
		return fmt.Errorf("%w: its validity ran out (at %s) before a renewal succeeded", ErrLeaseLost, until.Format(time.RFC3339Nano))
	})
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

// Name returns the lock's name.
func (l *Lease) Name() string { return l.name }

// Owner returns the owner value the lease was granted to.
func (l *Lease) Owner() string { return l.owner }

// Token returns the fencing token of the grant: larger than the token of
// every earlier grant of the same lock. It does not change when the lease is
// extended.
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
	q := lockReq{name: l.name, owner: l.owner, ttl: l.ttl}
	if l.session != nil {
		q.session = l.session.id
	}
	return q
}

func (l *Lease) extend(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	// Stop when either the caller or the lease is done.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	defer stop()

	p := retry{attempt: func() time.Duration { return l.attemptTimeout(l.c) }}
	v, sent, err := l.c.exchange(ctx, p, "FENCE.EXTEND", l.name, l.owner, millis(l.ttl))
	if err != nil {
		if cerr := l.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("extend %q: %w", l.name, err)
	}
	if n, _ := v.(int64); n != 1 {
		err := fmt.Errorf("%w: the server says owner %q no longer holds %q", ErrLeaseLost, l.owner, l.name)
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
	ok, err := l.c.release(ctx, l.req())
	switch {
	case err != nil:
		return err
	case !ok:
		l.released = true
		return fmt.Errorf("%w: the server says owner %q no longer held %q", ErrLeaseLost, l.owner, l.name)
	}
	l.released = true
	return nil
}

// grant is a granted acquire.
type grant struct {
	token uint64
	ttl   time.Duration
	sent  time.Time // just before the request that got it was sent
}

// lockReq is an acquire as it is sent: a lock for owner, with a TTL of its
// own, or under a session with a value.
type lockReq struct {
	name, owner string
	ttl         time.Duration // the lease's; under a session, the session's
	session     uint64        // zero: none
	value       string
}

// acquireArgs are the request's FENCE.ACQUIRE, waiting wait if not zero.
func (q lockReq) acquireArgs(wait time.Duration) []any {
	args := []any{"FENCE.ACQUIRE", q.name, q.owner, millis(q.ttl)}
	if q.session != 0 {
		args[3] = 0
	}
	if wait > 0 {
		args = append(args, "WAIT", millis(wait))
	}
	if q.session != 0 {
		args = append(args, "SESSION", q.session)
		if q.value != "" {
			args = append(args, "VALUE", q.value)
		}
	}
	return args
}

// releaseArgs are the request's FENCE.RELEASE.
func (q lockReq) releaseArgs() []any {
	if q.session != 0 {
		return []any{"FENCE.RELEASE", q.name, q.owner, "SESSION", q.session}
	}
	return []any{"FENCE.RELEASE", q.name, q.owner}
}

// acquire gets name for owner, waiting for it if wait is set. A grant
// arrives with at least part of its validity left, or acquire fails.
func (c *Client) acquire(ctx context.Context, name, owner string, ttl, drift time.Duration, wait bool) (grant, error) {
	return c.acquireReq(ctx, lockReq{name: name, owner: owner, ttl: ttl}, drift, wait)
}

func (c *Client) acquireReq(ctx context.Context, q lockReq, drift time.Duration, wait bool) (grant, error) {
	name, owner, ttl := q.name, q.owner, q.ttl
	if err := checkLease(name, ttl, drift); err != nil {
		return grant{}, err
	}
	g, granted, err := c.tryAcquire(ctx, q)
	if err == nil && !granted && wait {
		g, err = c.waitAcquire(ctx, q)
		granted = err == nil
	}
	if err != nil {
		return grant{}, fmt.Errorf("acquire %q: %w", name, err)
	}
	if !granted {
		return grant{}, fmt.Errorf("acquire %q: %w", name, ErrLocked)
	}
	if q.session != 0 || time.Until(g.sent.Add(g.ttl-drift)) > 0 {
		// (Under a session the grant is valid as long as the session.)
		return g, nil
	}
	// The grant took longer than its validity to arrive: renew it, which
	// counts from now, or give it up.
	v, sent, err := c.exchange(ctx, c.standard(), "FENCE.EXTEND", name, owner, millis(ttl))
	if n, _ := v.(int64); err == nil && n == 1 && time.Until(sent.Add(g.ttl-drift)) > 0 {
		g.sent = sent
		return g, nil
	}
	c.releaseLater(q)
	return grant{}, fmt.Errorf("acquire %q: %w: the grant arrived after its validity ended", name, ErrLeaseLost)
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
		if !errIs(err, ErrInvalidArgument, ErrClosed, ErrAuth, ErrNoPerm, ErrTLS, ErrSessionEnded) {
			c.releaseLater(q)
		}
		return grant{}, false, err
	}
	return parseGrant(v, q, sent)
}

// parseGrant reads the reply to q's FENCE.ACQUIRE: [token, granted-ttl-ms]
// or null; under a session the TTL is 0.
func parseGrant(v any, q lockReq, sent time.Time) (grant, bool, error) {
	ttl := q.ttl
	if v == nil {
		return grant{}, false, nil
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return grant{}, false, fmt.Errorf("client: unexpected reply to FENCE.ACQUIRE: %v", v)
	}
	tok, ok1 := a[0].(int64)
	ms, ok2 := a[1].(int64)
	if !ok1 || !ok2 || tok <= 0 || ms < 0 || ms == 0 && q.session == 0 {
		return grant{}, false, fmt.Errorf("client: unexpected reply to FENCE.ACQUIRE: %v", v)
	}
	if q.session != 0 {
		return grant{token: uint64(tok), ttl: ttl, sent: sent}, true, nil
	}
	return grant{token: uint64(tok), ttl: min(ttl, time.Duration(ms)*time.Millisecond), sent: sent}, true, nil
}

// release frees name if owner holds it; ok is false if the server says
// owner neither holds it nor released it last.
func (c *Client) release(ctx context.Context, q lockReq) (ok bool, err error) {
	v, _, err := c.exchange(ctx, c.standard(), q.releaseArgs()...)
	if err != nil {
		return false, fmt.Errorf("release %q: %w", q.name, err)
	}
	n, _ := v.(int64)
	return n == 1, nil
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

// errIs reports whether err is one of targets.
func errIs(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
