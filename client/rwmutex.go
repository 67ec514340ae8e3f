package client

import (
	"context"
	"fmt"
	"time"
)

// RWMutex is a read-write lock: any number of readers, or one writer. Every
// grant is a Lease with a fencing token of its own; a writer's token is
// larger than every earlier grant's on the lock, readers' included, while
// readers that hold together have different tokens, so a store fences them
// with a read-write validator (fence), not "highest token wins".
//
// Waits are first come, first served: a reader that arrives while a writer
// waits queues behind it, so a stream of readers does not starve a writer.
// A write lease can be downgraded to a read lease without a gap
// (Lease.Downgrade); a read lease cannot be upgraded: two readers upgrading
// at once would wait for each other forever. Release the read lease, then
// take the write lock. For the same reason, taking the write lock while the
// same process holds a read lease on it waits until the read lease ends.
//
// The lock is a key of its own kind on the server: a plain lock
// (Client.Acquire) or a semaphore of the same name is refused with
// ErrWrongType while held. An RWMutex holds no state; each Lock and RLock
// is a lease of its own, with a fresh owner (unless WithOwner), and
// Release, Extend, WithAutoRenew and WithSession work as for Acquire's.
type RWMutex struct {
	c    *Client
	name string
	opts []LeaseOption
}

// NewRWMutex returns the read-write lock name; opts apply to each of its
// leases. It does not lock it.
func (c *Client) NewRWMutex(name string, opts ...LeaseOption) *RWMutex {
	return &RWMutex{c: c, name: name, opts: opts}
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.name }

// Lock waits for the write side of the lock, as Client.Acquire waits for a
// lock, and returns its lease: granted when no one else holds the lock and
// every earlier waiter has been served.
func (m *RWMutex) Lock(ctx context.Context) (*Lease, error) {
	return m.c.acquireLease(ctx, lockReq{kind: writeLock, name: m.name}, true, m.opts)
}

// TryLock is Lock without waiting: if anyone holds the lock, or waits for
// it, it returns an error wrapping ErrLocked at once.
func (m *RWMutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.c.acquireLease(ctx, lockReq{kind: writeLock, name: m.name}, false, m.opts)
}

// RLock waits for a read side of the lock and returns its lease: granted
// when no writer holds the lock and every earlier waiter has been served.
func (m *RWMutex) RLock(ctx context.Context) (*Lease, error) {
	return m.c.acquireLease(ctx, lockReq{kind: readLock, name: m.name}, true, m.opts)
}

// TryRLock is RLock without waiting: if a writer holds the lock, or anyone
// waits for it, it returns an error wrapping ErrLocked at once.
func (m *RWMutex) TryRLock(ctx context.Context) (*Lease, error) {
	return m.c.acquireLease(ctx, lockReq{kind: readLock, name: m.name}, false, m.opts)
}

// Downgrade turns a write lease of an RWMutex into a read lease, with no
// gap between the two: the lease keeps its token, owner and validity
// (renewed from now), and readers waiting behind it may join it. It
// retries transient failures until ctx ends or the lease's validity runs
// out. It returns an error wrapping ErrInvalidArgument for a lease that is
// not a write lease (a read lease cannot be upgraded the other way), and
// one wrapping ErrLeaseLost, ending the lease, if the server says the
// owner no longer holds the write lock.
func (l *Lease) Downgrade(ctx context.Context) error {
	l.releaseMu.Lock()
	defer l.releaseMu.Unlock()
	if l.released {
		return l.Err()
	}
	if k := l.lockKind(); k != writeLock {
		return fmt.Errorf("%w: downgrade %q: not the write side of a read-write lock", ErrInvalidArgument, l.name)
	}
	if err := l.Err(); err != nil {
		return err
	}
	ctx, done := l.bound(ctx)
	defer done()

	q := l.req()
	q.kind = readLock
	p := l.c.standard()
	if l.session == nil {
		p = retry{attempt: func() time.Duration { return l.attemptTimeout(l.c) }}
	}
	// The writer's own read acquire is the downgrade; repeated (after an
	// unknown outcome), it renews the read lease it made.
	v, sent, err := l.c.exchange(ctx, p, q.acquireArgs(0)...)
	if err != nil {
		if cerr := l.Err(); cerr != nil {
			return cerr
		}
		return fmt.Errorf("downgrade %q: %w", l.name, err)
	}
	g, granted, err := parseGrant(v, q, sent)
	if err != nil {
		return err
	}
	if !granted || g.token != l.token {
		if granted {
			// The write lease had ended, and this made a new reader
			// that no one asked for.
			l.c.releaseLater(q)
		}
		l.cancel(fmt.Errorf("%w: the server says owner %q no longer holds the write lock %q", ErrLeaseLost, l.owner, l.name))
		return l.Err()
	}
	l.kind.Store(int32(readLock))
	if l.session == nil {
		l.renewed(sent)
	}
	return nil
}
