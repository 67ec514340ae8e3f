package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// Mutex is a distributed lock with redsync's API, so that code written for
// github.com/go-redsync/redsync/v4 moves over with little more than an import
// change. Unlike redsync it has a fencing token (Token), and Lock waits in
// the server's FIFO queue instead of polling.
//
// A Mutex is not renewed in the background; call Extend, or use
// Client.Acquire with WithAutoRenew. A Mutex is safe for concurrent use, but
// like redsync's it holds one lock at a time.
type Mutex struct {
	c          *Client
	name       string
	expiry     time.Duration
	tries      int
	retryDelay time.Duration
	genValue   func() (string, error)
	drift      float64
	session    *Session // nil: the lock has a TTL of its own

	mu    sync.Mutex
	value string
	token uint64
	until time.Time
}

// MutexOption configures a Mutex.
type MutexOption func(*Mutex)

// WithExpiry sets how long the lock lives unless extended. The default is 8s.
func WithExpiry(expiry time.Duration) MutexOption {
	return func(m *Mutex) { m.expiry = expiry }
}

// WithTries sets how many tries Lock has, WithRetryDelay the delay between
// them; together they bound how long Lock waits for a held lock: (tries − 1)
// × delay. Lock spends it waiting in the server's queue, not retrying. One
// try means do not wait. The default is 32.
func WithTries(tries int) MutexOption {
	return func(m *Mutex) { m.tries = tries }
}

// WithRetryDelay sets the delay between Lock's tries (see WithTries). The
// default is 250ms, so by default Lock waits up to 31 × 250ms = 7.75s.
func WithRetryDelay(delay time.Duration) MutexOption {
	return func(m *Mutex) { m.retryDelay = delay }
}

// WithDriftFactor sets the clock drift allowance as a fraction of the expiry
// (see WithDrift). The default is the client's, 0.01 unless set.
func WithDriftFactor(factor float64) MutexOption {
	return func(m *Mutex) { m.drift = factor }
}

// WithGenValueFunc sets the function that makes the value (the owner) for
// each Lock. Every value must be unique: the server refuses an owner whose
// release of the lock it remembers. The default makes 16 random bytes in
// hex.
func WithGenValueFunc(genValue func() (string, error)) MutexOption {
	return func(m *Mutex) { m.genValue = genValue }
}

// WithValue sets the mutex's value without locking, so that a lock taken
// elsewhere (by a Mutex with that value, or a lease with that owner) can be
// extended or unlocked through this one. The default is no value.
func WithValue(value string) MutexOption {
	return func(m *Mutex) { m.value = value }
}

// WithMutexSession locks the mutex under session s (see WithSession): the
// lock has no expiry of its own and lives as long as the session; Until is
// the session's, Extend keeps the session alive, and WithExpiry does not
// apply. The default is no session.
func WithMutexSession(s *Session) MutexOption {
	return func(m *Mutex) { m.session = s }
}

// req is the mutex's lock held by value, as requests name it.
func (m *Mutex) req(value string) lockReq {
	q := lockReq{name: m.name, owner: value, ttl: m.expiry}
	if m.session != nil {
		q.session, q.ttl = m.session.id, m.session.ttl
	}
	return q
}

// defaultRetryDelay is the delay between Lock's tries.
const (
	defaultTries      = 32
	defaultRetryDelay = 250 * time.Millisecond
)

// NewMutex returns a mutex for the lock name. It does not lock it.
func (c *Client) NewMutex(name string, opts ...MutexOption) *Mutex {
	m := &Mutex{
		c:          c,
		name:       name,
		expiry:     defaultTTL,
		tries:      defaultTries,
		retryDelay: defaultRetryDelay,
		genValue:   randomOwner,
		drift:      c.cfg.drift,
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Value returns the value (owner) of the current or last lock.
func (m *Mutex) Value() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.value
}

// Until returns when the lock's validity ends as the client counts it (see
// Lease.Until); the zero time before the first Lock.
func (m *Mutex) Until() time.Time {
	if m.session != nil && m.Token() != 0 {
		return m.session.Until()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.until
}

// Token returns the fencing token of the current or last lock: larger than
// the token of every earlier grant of the lock. Pass it to the storage the
// lock protects. It is 0 before the first Lock.
func (m *Mutex) Token() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.token
}

// Lock locks m, waiting for it in the server's queue for up to (tries − 1) ×
// retry delay. It returns an error wrapping both ErrFailed and ErrLocked if
// the lock stayed held by another owner.
func (m *Mutex) Lock() error {
	return m.LockContext(context.Background())
}

// LockContext is Lock with a context; it stops waiting when ctx ends.
func (m *Mutex) LockContext(ctx context.Context) error {
	return m.lock(ctx, m.budget() > 0)
}

// TryLock locks m only if it is free: it does not wait. It returns an error
// wrapping both ErrFailed and ErrLocked if another owner holds the lock.
func (m *Mutex) TryLock() error {
	return m.TryLockContext(context.Background())
}

// TryLockContext is TryLock with a context.
func (m *Mutex) TryLockContext(ctx context.Context) error {
	return m.lock(ctx, false)
}

func (m *Mutex) lock(ctx context.Context, wait bool) error {
	value, err := m.genValue()
	if err != nil {
		return err
	}
	lctx := ctx
	if wait {
		var cancel context.CancelFunc
		lctx, cancel = context.WithTimeout(ctx, m.budget())
		defer cancel()
	}
	drift := allowance(m.expiry, m.drift)
	if m.session != nil {
		drift = 0 // the session counts its own validity
	}
	g, err := m.c.acquireReq(lctx, m.req(value), drift, wait)
	switch {
	case err == nil:
	case ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		// Lock's own bound passed: as with redsync, a failure to lock, not
		// the caller's deadline.
		budget := m.budget()
		if errors.Is(err, ErrLocked) {
			return fmt.Errorf("%w %q: %w (waited %v)", ErrFailed, m.name, ErrLocked, budget)
		}
		return fmt.Errorf("%w %q: %w (for %v): %v", ErrFailed, m.name, ErrNoLeader, budget, err)
	case errors.Is(err, ErrLocked):
		return fmt.Errorf("%w: %w", ErrFailed, err)
	default:
		return err
	}
	// g.rounds is left to end on its own: a plain lock's release is
	// remembered, so a round that reaches the server after Unlock is
	// refused (rounds).
	m.mu.Lock()
	defer m.mu.Unlock()
	m.value, m.token = value, g.token
	m.until = g.sent.Add(g.ttl - allowance(m.expiry, m.drift))
	return nil
}

// budget is how long Lock waits: (tries − 1) × retry delay, without
// overflowing.
func (m *Mutex) budget() time.Duration {
	if m.retryDelay <= 0 || m.tries <= 1 {
		return 0
	}
	if int64(m.tries-1) > int64(math.MaxInt64/m.retryDelay) {
		return math.MaxInt64
	}
	return time.Duration(m.tries-1) * m.retryDelay
}

// Unlock unlocks m and reports whether it held the lock. It returns false
// and an error wrapping ErrLockAlreadyExpired and ErrLeaseLost if the lock
// was no longer held by m's value.
func (m *Mutex) Unlock() (bool, error) {
	return m.UnlockContext(context.Background())
}

// UnlockContext is Unlock with a context.
func (m *Mutex) UnlockContext(ctx context.Context) (bool, error) {
	value := m.Value()
	if value == "" {
		return false, fmt.Errorf("%w: %w: mutex %q was never locked", ErrLockAlreadyExpired, ErrLeaseLost, m.name)
	}
	ok, err := m.c.release(ctx, m.req(value))
	switch {
	case err != nil:
		return false, err
	case !ok:
		return false, fmt.Errorf("%w: %w: the server says %q is not held by %q", ErrLockAlreadyExpired, ErrLeaseLost, m.name, value)
	}
	m.mu.Lock()
	m.until = time.Time{}
	m.mu.Unlock()
	return true, nil
}

// Extend resets m's expiry to the full expiry from now and reports whether
// it did. It returns false and an error wrapping ErrExtendFailed and
// ErrLeaseLost if the lock is no longer held by m's value.
func (m *Mutex) Extend() (bool, error) {
	return m.ExtendContext(context.Background())
}

// ExtendContext is Extend with a context.
func (m *Mutex) ExtendContext(ctx context.Context) (bool, error) {
	value := m.Value()
	if value == "" {
		return false, fmt.Errorf("%w: %w: mutex %q was never locked", ErrExtendFailed, ErrLeaseLost, m.name)
	}
	if m.session != nil {
		if err := m.session.KeepAlive(ctx); err != nil {
			return false, fmt.Errorf("%w: %w", ErrExtendFailed, err)
		}
		// The session lives; the lock itself may have been taken from it.
		v, _, err := m.c.exchange(ctx, m.c.standard(), "FENCE.TOKEN", m.name, value)
		if err != nil {
			return false, fmt.Errorf("extend %q: %w", m.name, err)
		}
		if tok, _ := v.(int64); uint64(tok) != m.Token() {
			return false, fmt.Errorf("%w: %w: %q is no longer held by %q", ErrExtendFailed, ErrLeaseLost, m.name, value)
		}
		return true, nil
	}
	drift := allowance(m.expiry, m.drift)
	if err := checkLease(m.name, m.expiry, drift); err != nil {
		return false, err
	}
	v, sent, err := m.c.exchange(ctx, m.c.standard(), "FENCE.EXTEND", m.name, value, millis(m.expiry))
	if err != nil {
		return false, fmt.Errorf("extend %q: %w", m.name, err)
	}
	if n, _ := v.(int64); n != 1 {
		return false, fmt.Errorf("%w: %w: the server says %q is not held by %q", ErrExtendFailed, ErrLeaseLost, m.name, value)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.value == value {
		m.until = sent.Add(m.expiry - drift)
	}
	return true, nil
}
